"""Step boundaries from whatever the loop reveals, checked on the tracker alone, on both
builds of steps.py (``tracker_cls`` in conftest.py: plain and compiled), same assertions.
Real trainings under ``perftop run`` are in test_tracker_e2e.py and test_frameworks.py."""

from __future__ import annotations

import gc
import random

import pytest


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self, dt: float) -> tuple[float, float]:
        t0 = self.t
        self.t += dt
        return t0, self.t


class Opt:
    """Stands for a torch optimizer: the tracker only keeps weak references to it."""


@pytest.fixture
def make(tracker_cls):
    def make():
        clock = Clock()
        steps: list[tuple] = []
        between: list[tuple] = []
        tr = tracker_cls(steps.append)
        tr.clock = lambda: clock.t
        tr.on_between = lambda kind, t0, length: between.append(
            (kind, round(t0, 6), round(length, 6))
        )
        return tr, steps, between, clock

    return make


def opt_step(tr, c, opt, dt=0.05, closure_work=None):
    """``opt.step()`` as torch runs it: pre-hook, the step (maybe a closure), post-hook."""
    t0, _ = c(0)
    new = tr.optimizer_pre(opt, t0, (opt, closure_work) if closure_work else (opt,), {})
    if closure_work:
        closure = new[0][1]
        for _ in range(closure_work.calls):
            closure()
    c(dt)
    tr.optimizer_post(opt, c.t)


def dur(s):
    return round(s[2] - s[1], 6)


def test_optimizer_loop_with_loader(make):
    tr, steps, _, c = make()
    opt = Opt()
    for _ in range(3):
        tr.fetched(*c(0.5))  # data wait
        c(0.1)  # forward
        tr.backward(*c(0.2))
        opt_step(tr, c, opt)
    assert len(steps) == 3
    idx, t0, t1, data, bwd, o, phases, source = steps[1]
    assert idx == 1 and source == "optimizer"
    assert round(t1 - t0, 6) == 0.85 and round(data, 6) == 0.5 and round(bwd, 6) == 0.2
    assert round(o, 6) == 0.05


def test_first_iteration_is_not_counted_twice_when_optimizer_shows_up_late(make):
    tr, steps, _, c = make()
    opt = Opt()
    for _ in range(4):
        c(0.1)
        tr.backward(*c(0.1))
        opt_step(tr, c, opt, 0.1)
    assert [s[0] for s in steps] == [0, 1, 2, 3]


class Closure:
    """An LBFGS-like closure: forward then backward, called ``calls`` times per step."""

    def __init__(self, tr, c, calls=1, fwd=0.1, bwd=0.2):
        self.tr, self.c, self.calls, self.fwd, self.bwd = tr, c, calls, fwd, bwd

    def __call__(self):
        self.c(self.fwd)
        self.tr.backward(*self.c(self.bwd))
        return 1.0


def test_closure_optimizer_one_step_per_step_call_and_update_alone(make):
    tr, steps, _, c = make()
    opt = Opt()
    for _ in range(4):
        tr.fetched(*c(0.05))
        opt_step(tr, c, opt, 0.03, Closure(tr, c, calls=5))
    assert len(steps) == 4
    for s in steps:
        assert dur(s) == 0.05 + 5 * 0.3 + 0.03
        assert round(s[4], 6) == 1.0  # five backwards, counted once
        assert round(s[5], 6) == 0.03  # the update alone, not the closure
    other = dur(steps[0]) - steps[0][3] - steps[0][4] - steps[0][5]
    assert round(other, 6) == 0.5  # the forwards inside the closure


def test_a_long_first_closure_step_is_not_released_as_backward_steps(make):
    """LBFGS on a big model: the first step's closure calls outlast the hold (5 s)."""
    tr, steps, _, c = make()
    opt = Opt()
    for _ in range(3):
        opt_step(tr, c, opt, 0.1, Closure(tr, c, calls=20, fwd=0.2, bwd=0.3))
    assert len(steps) == 3 and all(s[7] == "optimizer" for s in steps)


def test_manual_sgd_with_loader_keeps_the_update_in_its_step(make):
    tr, steps, _, c = make()
    for _ in range(3):
        tr.fetched(*c(0.3))
        tr.backward(*c(0.2))
        c(0.4)  # the hand-written update
    tr.flush()
    assert len(steps) == 3
    assert [dur(s) for s in steps[:2]] == [0.9, 0.9]
    assert all(s[7] == "backward" for s in steps)


def test_loader_only_loop(make):
    tr, steps, _, c = make()
    for _ in range(5):
        tr.fetched(*c(0.1))
        c(0.2)
    t0, t1 = c(0.01)  # the StopIteration call closes the last step
    tr.fetched(t0, t1, got_batch=False)
    assert steps == []  # held back until the loop shows whether an optimizer exists
    tr.flush()
    assert len(steps) == 5 and all(s[7] == "loader" for s in steps)


@pytest.mark.parametrize("first", ["d", "g"])
def test_gan_two_optimizers_one_step_per_iteration(make, first):
    tr, steps, _, c = make()
    d, g = Opt(), Opt()
    order = (d, g) if first == "d" else (g, d)
    for _ in range(5):
        tr.fetched(*c(0.1))
        for opt in order:
            tr.backward(*c(0.1))
            opt_step(tr, c, opt, 0.1)
    assert len(steps) == 5
    assert round(steps[2][5], 6) == 0.2  # both optimizers' time in the optimizer phase


def test_gradient_accumulation_counts_optimizer_steps(make):
    tr, steps, _, c = make()
    opt = Opt()
    for _ in range(2):
        for _ in range(4):
            tr.fetched(*c(0.1))
            tr.backward(*c(0.1))
        opt_step(tr, c, opt, 0.1)
    assert len(steps) == 2 and round(steps[0][4], 6) == 0.4


def test_accumulation_with_batches_fetched_up_front(make):
    """The HF Trainer fetches every micro-batch of an optimizer step first."""
    tr, steps, _, c = make()
    opt = Opt()
    for _ in range(3):
        for _ in range(4):
            tr.fetched(*c(0.1), True, 0)
        for _ in range(4):
            tr.backward(*c(0.1))
        opt_step(tr, c, opt, 0.1)
    assert [dur(s) for s in steps] == [0.9, 0.9, 0.9]


def test_replaced_optimizer_freed_keeps_counting(make):
    tr, steps, _, c = make()
    opt = Opt()
    for i in range(6):
        if i == 3:
            del opt
            gc.collect()
            opt = Opt()  # may well reuse the freed object's address
        tr.backward(*c(0.1))
        opt_step(tr, c, opt, 0.1)
    assert [s[0] for s in steps] == list(range(6))
    assert all(dur(s) == 0.2 for s in steps)


def test_replaced_optimizer_still_alive_keeps_counting(make):
    """A warm-up optimizer kept alive, then the main one: no step is lost or merged."""
    tr, steps, _, c = make()
    warm, main = Opt(), Opt()
    for i in range(8):
        tr.fetched(*c(0.1))
        tr.backward(*c(0.1))
        opt_step(tr, c, warm if i < 3 else main, 0.1)
    assert [s[0] for s in steps[:7]] == list(range(7))
    assert all(dur(s) == 0.3 and round(s[5], 6) == 0.1 for s in steps)


def test_nested_optimizer_steps_count_once(make):
    """A wrapping optimizer whose step() calls the wrapped one's (both hooked)."""
    tr, steps, _, c = make()
    outer, inner = Opt(), Opt()
    for _ in range(3):
        tr.backward(*c(0.1))
        tr.optimizer_pre(outer, c.t)
        tr.optimizer_pre(inner, c(0.01)[1])
        tr.optimizer_post(inner, c(0.1)[1])
        tr.optimizer_post(outer, c(0.01)[1])
    assert len(steps) == 3 and all(round(s[5], 6) == 0.12 for s in steps)


def test_explicit_steps_win_and_phases_are_kept(make):
    tr, steps, _, c = make()
    opt = Opt()
    for _ in range(3):
        tr.phase("forward", *c(0.2))
        tr.backward(*c(0.1))
        opt_step(tr, c, opt, 0.1)
        tr.explicit(c.t)
    # The optimizer closed the first step before the first explicit call was seen: that
    # call ends the same iteration, so it adds no step; one step a call, end to end.
    assert [s[7] for s in steps] == ["optimizer", "explicit", "explicit"]
    assert all(a[2] == b[1] for a, b in zip(steps, steps[1:]))
    assert round(steps[-1][6]["forward"], 6) == 0.2


@pytest.mark.parametrize("tail", ["gan", "fetch_ahead"])
def test_the_first_explicit_call_ends_the_iteration_an_update_closed(make, tail):
    """Work after the optimizer's step before the first call (a GAN's second optimizer
    after its own backward, or the next batch fetched ahead): the call ends the same
    iteration, so the tail is the next step's, and each call ends one step."""
    tr, steps, _, c = make()
    d, g = Opt(), Opt()
    tr.fetched(*c(0.1))
    for _ in range(3):
        tr.backward(*c(0.1))
        opt_step(tr, c, d, 0.1)
        if tail == "gan":
            tr.backward(*c(0.1))
            opt_step(tr, c, g, 0.1)
        tr.fetched(*c(0.1))
        tr.explicit(c.t)
    assert [s[7] for s in steps] == ["optimizer", "explicit", "explicit"]
    # the first step ended at its update; the second holds that iteration's tail
    assert [dur(s) for s in steps] == ([0.3, 0.8, 0.5] if tail == "gan" else [0.3, 0.4, 0.3])
    assert all(a[2] == b[1] for a, b in zip(steps, steps[1:]))


def test_held_steps_are_released_after_the_hold_limit(make):
    tr, steps, _, c = make()
    for i in range(70):
        tr.fetched(*c(0.01))
        tr.backward(*c(0.01))
        if i == 63:
            assert steps == []  # 63 closed steps held, none emitted yet
    # Released as they were once the hold was full (no optimizer came), then emitted live.
    assert [s[0] for s in steps] == list(range(69))


# -- time outside training steps ---------------------------------------------------------
TRAIN, VAL = 0, 1  # loader numbers, as torch_patch sets them on iterators


def train_step(tr, c, opt, data=0.1):
    tr.fetched(*c(data), True, TRAIN)
    c(0.1)
    tr.backward(*c(0.1))
    opt_step(tr, c, opt, 0.1)


def test_eval_under_no_grad_is_between_steps(make):
    tr, steps, between, c = make()
    opt = Opt()
    for _ in range(2):
        for _ in range(3):
            train_step(tr, c, opt)
        for _ in range(4):  # with torch.no_grad(): for batch in val_loader: model(batch)
            tr.fetched(*c(0.2), True, VAL, False)
            c(0.3)
        tr.fetched(*c(0.01), False, VAL, False)  # the val loader's StopIteration
    tr.flush()
    assert len(steps) == 6 and all(dur(s) == 0.4 for s in steps)
    assert all(round(s[3], 6) == 0.1 for s in steps)  # eval batches are not data wait
    assert between == [("eval", 1.2, 2.01), ("eval", 4.41, 2.01)]


def test_eval_with_grad_on_from_another_loader(make):
    """The HF Trainer's evaluation loop fetches with grad on; no_grad is inside the step."""
    tr, steps, between, c = make()
    opt = Opt()
    for _ in range(2):
        train_step(tr, c, opt)
    for _ in range(3):
        tr.fetched(*c(0.2), True, VAL)
        c(0.3)
    for _ in range(2):
        train_step(tr, c, opt)
    assert [dur(s) for s in steps] == [0.4] * 4
    assert between == [("eval", 0.8, 1.5)]


def test_an_epochs_end_after_a_validation_loaders_end_is_the_pass(make):
    """skorch: the validation's batches with grad on, its loader's StopIteration, the
    epoch's end (scores, a printed row), then the training loader's first batch: the pass
    runs to that batch's fetch, and the step waits for its own batch only."""
    tr, steps, between, c = make()
    opt = Opt()
    for _ in range(2):
        train_step(tr, c, opt)
    for _ in range(3):
        tr.fetched(*c(0.2), True, VAL)
        c(0.3)
    tr.fetched(*c(0.01), False, VAL)  # the validation loader's end, grad on
    c(0.5)  # the epoch's end
    for _ in range(2):
        train_step(tr, c, opt)
    assert [dur(s) for s in steps] == [0.4] * 4
    assert all(round(s[3], 6) == 0.1 for s in steps)
    assert between == [("eval", 0.8, 2.01)]


def test_a_new_training_loader_is_not_an_evaluation(make):
    """A second fit with a new DataLoader: its first batch is followed by training."""
    tr, steps, between, c = make()
    opt = Opt()
    for _ in range(2):
        train_step(tr, c, opt)
    for _ in range(3):
        tr.fetched(*c(0.1), True, 7)
        c(0.1)
        tr.backward(*c(0.1))
        opt_step(tr, c, opt, 0.1)
    assert [dur(s) for s in steps] == [0.4] * 5 and between == []
    assert all(round(s[3], 6) == 0.1 for s in steps)


def test_a_new_loaders_batch_read_ahead_is_no_evaluation(make):
    """A prefetching wrapper over a loader made anew each epoch (Ray Train's, a user's
    ``Prefetch(DataLoader(...))``): the new loader's first two batches come at once, before
    any training. Read ahead, both the step's wait; not an evaluation of the first."""
    tr, steps, between, c = make()
    opt = Opt()
    for _ in range(2):
        train_step(tr, c, opt)
    tr.fetched(*c(0.1), True, 7)
    tr.fetched(*c(0.1), True, 7)  # the next batch, at once
    c(0.1)
    tr.backward(*c(0.1))
    opt_step(tr, c, opt, 0.1)
    assert between == [], between
    assert [dur(s) for s in steps] == [0.4, 0.4, 0.5]
    assert round(steps[-1][3], 6) == 0.2  # both fetches: its data wait


def test_a_read_ahead_preempted_between_its_fetches_is_no_evaluation(make):
    """The same on a busy host: the wrapper is preempted for 20 ms between its two fetches.
    No module call came between them (the forward pre-hook armed at the step's end still
    waits): read ahead. Under load it read as an evaluation of the first batch, by the
    wall time between them alone."""
    tr, steps, between, c = make()
    armed = [True]
    tr.watching = lambda t: armed[0]
    opt = Opt()
    for _ in range(2):
        train_step(tr, c, opt)
    tr.fetched(*c(0.1), True, 7)
    c(0.02)  # preempted
    tr.fetched(*c(0.1), True, 7)
    c(0.1)
    armed[0] = False  # the step's forward
    tr.backward(*c(0.1))
    opt_step(tr, c, opt, 0.1)
    assert between == [], between
    assert round(steps[-1][3], 6) == 0.22  # the wrapper's two fetches, the wait between


@pytest.mark.parametrize(("armed", "work"), [(False, 0.002), (False, 0.0002), (None, 0.002)])
def test_a_second_batch_after_a_module_call_is_an_evaluations(make, armed, work):
    """... but where a module call came between them (the hook fired after the first: a
    forward with grad on, not the step's since no training followed), however soon (a
    small model's forward), or there is no such hook and the next batch came 2 ms later,
    the first batch was an evaluation's."""
    tr, steps, between, c = make()
    tr.watching = None if armed is None else (lambda t: armed)
    opt = Opt()
    for _ in range(2):
        train_step(tr, c, opt)
    tr.fetched(*c(0.1), True, VAL)
    c(work)  # work on the first batch
    tr.fetched(*c(0.1), True, VAL)
    c(0.1)
    for _ in range(2):
        train_step(tr, c, opt)
    assert [b[0] for b in between] == ["eval"], between


def test_a_validation_with_grad_on_in_a_loop_without_a_loader_is_a_pass(make):
    """A loop fed without a DataLoader (slices of a tensor) evaluates over a validation
    loader with grad on (a forward between its batches, the hook fired after each): each
    evaluation is a pass, from its first batch to the loader's end, and the validation
    loader never becomes a training one (it was taken for the next training loader,
    its batches the steps' data wait, before the first training loader was known; and
    the pass's last batch for training's, once training followed it with no batch)."""
    tr, steps, between, c = make()
    tr.watching = lambda t: False  # a forward came after each batch
    opt = Opt()

    def feeder_step():
        c(0.1)  # a slice of the data, then the forward
        tr.backward(*c(0.1))
        opt_step(tr, c, opt, 0.1)

    for _ in range(2):
        for _ in range(3):
            feeder_step()
        t0 = c.t
        for _ in range(3):
            tr.fetched(*c(0.01), True, VAL)
            c(0.0002)  # a small model's forward
        tr.fetched(*c(0.01), False, VAL)  # the loader's end
        t1 = c.t
        c(0.001)  # the evaluation's score
    feeder_step()
    assert [b[0] for b in between] == ["eval", "eval"], between
    assert all(b[2] == round(t1 - t0, 6) for b in between), (between, t1 - t0)
    assert len(steps) == 7 and all(s[3] == 0.0 for s in steps), steps  # no data wait


def test_checkpoint_and_eval_in_one_gap(make):
    tr, steps, between, c = make()
    opt = Opt()
    train_step(tr, c, opt)
    tr.fetched(*c(0.2), True, VAL, False)
    c(0.3)
    c(0.05)  # building the state dict
    tr.saved(*c(0.5))
    train_step(tr, c, opt)
    train_step(tr, c, opt)
    assert [dur(s) for s in steps] == [0.4] * 3
    assert between == [("checkpoint", 0.95, 0.5), ("eval", 0.4, 0.55)]


def test_checkpoint_alone(make):
    """The checkpoint is torch.save's own time; the loop's 50 ms before it (after the
    update: a log line, state_dict()) stay in the next step, as when no save comes."""
    tr, steps, between, c = make()
    opt = Opt()
    train_step(tr, c, opt)
    c(0.05)
    tr.saved(*c(0.5))
    train_step(tr, c, opt)
    train_step(tr, c, opt)
    assert [dur(s) for s in steps] == [0.4, 0.45, 0.4]
    assert between == [("checkpoint", 0.45, 0.5)]


def test_a_wait_at_a_saves_return_is_the_checkpoints(make):
    """Reading the thread's CPU clock where a save returns can end its time slice there (a
    loaded host: a few ms for a core): the checkpoint ends where the hook's reads did, as
    the job's own timer around the save has it, and the next step is none the longer."""
    tr, steps, between, c = make()
    opt = Opt()
    train_step(tr, c, opt)
    t0, t1 = c(0.5)
    tr.saving(t0)
    c(0.005)  # the hook's reads at the return waited for a core
    tr.saved(t0, t1)
    train_step(tr, c, opt)
    train_step(tr, c, opt)
    assert between == [("checkpoint", 0.4, 0.505)]
    assert [dur(s) for s in steps] == [0.4] * 3


def test_a_checkpoint_opens_where_its_save_begins(make):
    """The monitor hears of a checkpoint when its save begins (``on_open``: a save running
    seconds is no stalled step), not once it returned; the interval is the same."""
    tr, steps, between, c = make()
    opened = []
    tr.on_open = lambda kind, t0: opened.append((kind, round(t0, 6)))
    opt = Opt()
    train_step(tr, c, opt)
    c(0.05)
    t0, _ = c(0)
    tr.saving(t0)
    assert opened == [("checkpoint", 0.45)] and between == []
    tr.saved(t0, c(0.5)[1])
    tr.saved(*c(0.2))  # a burst's second save: the same checkpoint, opened once
    train_step(tr, c, opt)
    assert opened == [("checkpoint", 0.45)]
    assert between == [("checkpoint", 0.45, 0.7)]


def test_an_unseen_evaluation_after_a_checkpoint_counts_no_second_twice(make):
    """A checkpoint, then an evaluation's first batch with no region around its loop (its
    pass began unseen, after the checkpoint): the two intervals do not overlap, and the
    next step does not keep the checkpoint's cut (a negative step, found by the random
    sequences below)."""
    tr, steps, between, c = make()
    opt = Opt()
    train_step(tr, c, opt)
    tr.saved(*c(0.3))
    tr.fetched(*c(0.01), True, VAL, False)
    c(0.2)
    train_step(tr, c, opt)
    assert between == [("checkpoint", 0.4, 0.3), ("eval", 0.7, 0.21)]
    assert all(dur(s) >= 0 for s in steps) and steps[-1][1] >= 0.91 - 1e-9


def test_evaluation_inside_a_step_is_cut_out_of_it(make):
    """The batch is fetched, then an evaluation runs, then forward and backward."""
    tr, steps, between, c = make()
    opt = Opt()
    train_step(tr, c, opt)
    tr.fetched(*c(0.1), True, TRAIN)
    tr.fetched(*c(1.0), True, VAL, False)
    tr.backward(*c(0.2))
    opt_step(tr, c, opt, 0.1)
    train_step(tr, c, opt)
    assert [dur(s) for s in steps] == [0.4, 0.4, 0.4]
    assert between == [("eval", 0.5, 1.0)]


def test_a_final_evaluation_ends_at_exit(make):
    tr, steps, between, c = make()
    opt = Opt()
    train_step(tr, c, opt)
    tr.fetched(*c(0.2), True, VAL, False)
    tr.flush()
    assert len(steps) == 1 and between == [("eval", 0.4, 0.2)]


def test_backward_loop_with_eval(make):
    """No optimizer: the eval's first batch closes the open step, the update stays in it."""
    tr, steps, between, c = make()
    for _ in range(3):
        tr.fetched(*c(0.1), True, TRAIN)
        tr.backward(*c(0.1))
        c(0.2)  # manual update
    for _ in range(2):
        tr.fetched(*c(0.1), True, VAL, False)
    for _ in range(2):
        tr.fetched(*c(0.1), True, TRAIN)
        tr.backward(*c(0.1))
        c(0.2)
    tr.flush()
    assert [dur(s) for s in steps] == [0.4] * 4 + [0.2]
    assert between == [("eval", 1.2, 0.2)]


def test_evaluation_before_training(make):
    """Lightning's sanity check runs validation batches before the first training step."""
    tr, steps, between, c = make()
    opt = Opt()
    for _ in range(2):
        tr.fetched(*c(0.2), True, VAL, False)
    for _ in range(3):
        train_step(tr, c, opt)
    assert [dur(s) for s in steps] == [0.4] * 3 and between == [("eval", 0.0, 0.4)]


@pytest.mark.parametrize("seed", range(30))
def test_no_phase_is_longer_than_its_step(make, seed):
    rng = random.Random(seed)
    tr, steps, between, c = make()
    opts = [Opt(), Opt()]
    for _ in range(rng.randrange(50, 300)):
        op = rng.choice(["fetch", "val", "bwd", "opt", "closure", "save", "phase", "idle"])
        dt = rng.choice([0.001, 0.01, 0.3, 2.0])
        if op == "fetch":
            tr.fetched(*c(dt), rng.random() > 0.1, rng.choice([TRAIN, TRAIN, 5]))
        elif op == "val":
            tr.fetched(*c(dt), True, VAL, False)
        elif op == "bwd":
            tr.backward(*c(dt))
        elif op in ("opt", "closure"):
            work = Closure(tr, c, rng.randrange(1, 4)) if op == "closure" else None
            opt_step(tr, c, rng.choice(opts), dt, work)
        elif op == "save":
            tr.saved(*c(dt))
        elif op == "phase":
            tr.phase("x", *c(dt))
        else:
            c(dt)
    tr.flush()
    total = sum(dur(s) for s in steps) + sum(b[2] for b in between)
    assert total <= c.t + 1e-6  # steps and intervals never overlap
    for s in steps:
        d = s[2] - s[1]
        assert d >= 0 and all(0 <= x <= d + 1e-9 for x in s[3:6])
    assert all(b[2] > 0 for b in between)


def test_a_steps_phases_never_add_up_to_more_than_the_step(make):
    """Each phase is capped at its step, and the data wait at what backward and the
    optimizer leave: a fetch whose start a cut-out interval moved behind the step's start
    (its time over the step's) once gave a step a data wait of its whole length and a
    backward and an optimizer on top (CI, a loaded VM, the compiled build)."""
    tr, steps, _, _ = make()
    tr.running, tr.start, tr.hole, tr.has_fetch = True, 10.0, 0.0, True
    tr.data, tr.bwd, tr.opt = 0.9, 0.2, 0.1
    tr.close(11.0)
    tr.running, tr.start, tr.hole, tr.has_fetch = True, 11.0, 0.0, True
    tr.data, tr.bwd, tr.opt = 0.3, 0.2, 0.1  # within the step: as measured
    tr.close(12.0)
    tr.flush()
    (_, t0, t1, data, bwd, opt, *_), second = steps[0], steps[1]
    assert (t0, t1, bwd, opt) == (10.0, 11.0, 0.2, 0.1)
    assert data == pytest.approx(0.7) and data + bwd + opt <= t1 - t0 + 1e-9
    assert second[3:6] == (0.3, 0.2, 0.1)
