"""The tracker alone on the loop shapes of issue 18 (both builds, ``tracker_cls``): nested
backward, ``autograd.grad`` loops, threads, ``no_grad`` regions between steps. Real
trainings of these shapes are in test_loop_shapes.py."""

from __future__ import annotations

import threading

import pytest


class Ctx:
    """Stands for a ``torch.no_grad()`` instance: ``prev`` is grad mode before it."""

    prev = True


class Opt:
    pass


@pytest.fixture
def tr(tracker_cls):
    steps: list[tuple] = []
    between: list[tuple] = []
    t = tracker_cls(steps.append)
    t.settled = True
    t.on_between = lambda kind, t0, length: between.append((kind, round(t0, 6), round(length, 6)))
    return t, steps, between


def _opt_step(t, opt, t0, t1):
    t.optimizer_pre(opt, t0)
    t.optimizer_post(opt, t1)


def test_autograd_grad_steps_then_time_only_after_a_backward(tr):
    t, steps, _ = tr
    for i in range(4):
        t.grads(i + 0.5, i + 0.8)
    t.flush()
    assert len(steps) == 4 and steps[0][-1] == "backward"


def test_autograd_grad_in_a_backward_loop_adds_time_only(tr):
    t, steps, _ = tr
    t.backward(10.0, 10.2)
    t.grads(10.3, 10.4)  # a gradient penalty: no step of its own
    t.backward(11.0, 11.2)
    assert len(steps) == 1 and abs(steps[0][4] - 0.3) < 1e-9


def _region(t, ctx, t0, t1):
    """A ``with torch.no_grad():`` block at one call site (the line entering it here)."""
    t.no_grad(True, ctx, t0)
    t.no_grad(False, ctx, t1)


def _evaluate(t, ctx, t0, t1):
    """A region at another site: an ``evaluate()``."""
    t.no_grad(True, ctx, t0)
    t.no_grad(False, ctx, t1)


def test_no_grad_region_between_optimizer_steps_is_eval(tr):
    t, steps, between = tr
    opt, ctx = Opt(), Ctx()
    t.backward(0.1, 0.2)
    _opt_step(t, opt, 0.3, 0.4)
    _region(t, ctx, 0.5, 1.5)  # an estimate_loss() right after the step
    t.backward(1.6, 1.7)
    _opt_step(t, opt, 1.8, 1.9)
    assert between == [("eval", 0.5, 1.0)]  # from the region's entry, not the step's end
    # the step after: 0.4 .. 0.5 (the loop's own code before the pass) and 1.5 .. 1.9
    assert abs((steps[-1][2] - steps[-1][1]) - 0.5) < 1e-9
    # A site the last step also met is per-step work (a target network).
    _region(t, ctx, 2.0, 2.5)
    t.backward(2.6, 2.7)
    _opt_step(t, opt, 2.8, 2.9)
    assert len(between) == 1
    # Another site, not met in the step before: an evaluation.
    _evaluate(t, ctx, 3.0, 3.5)
    t.backward(3.6, 3.7)
    _opt_step(t, opt, 3.8, 3.9)
    assert between[1:] == [("eval", 3.0, 0.5)]


def test_no_grad_region_inside_a_step_or_before_training_is_not_eval(tr):
    t, _, between = tr
    ctx = Ctx()
    t.no_grad(True, ctx, 0.0)  # a model's init
    t.no_grad(False, ctx, 0.1)
    t.backward(0.2, 0.3)
    t.no_grad(True, ctx, 0.4)  # a manual SGD update after backward
    t.no_grad(False, ctx, 0.5)
    t.backward(0.6, 0.7)
    assert between == []


def test_manual_update_loop_evaluation_is_between_steps(tr):
    """No optimizer: backward() then a no_grad update at one site every step; an
    ``evaluate()`` from another site after step 3 (and twice after step 5) is cut out of
    the steps, each pass once; the update's region stays in its step. backward() ends
    steps: each step, from one backward's start to the next, goes on over its passes (it
    holds the next iteration's batch and forward, as the steps without a pass do)."""
    t, steps, between = tr
    ctx = Ctx()
    for i in range(6):
        t.backward(i + 0.1, i + 0.2)
        _region(t, ctx, i + 0.3, i + 0.4)  # p.add_(p.grad, alpha=-lr)
        if i == 3:
            _evaluate(t, ctx, i + 0.5, i + 0.9)
        if i == 5:  # after the last step: a final test, twice (two sets, one call site)
            for k in range(2):
                _evaluate(t, ctx, i + 0.5 + k * 0.2, i + 0.6 + k * 0.2)
    t.flush()
    assert [(k, round(a, 3), round(n, 3)) for k, a, n in between] == [
        ("eval", 3.5, 0.4),
        ("eval", 5.5, 0.1),
        ("eval", 5.7, 0.1),  # its own time: the loop's code between them is in neither
    ]
    assert len(steps) == 6 and steps[3][2] == pytest.approx(4.1)  # at the next backward
    assert [round(s[2] - s[1], 6) for s in steps] == [1.0, 1.0, 1.0, 0.6, 1.0, 0.5]
    assert steps[4][1] == pytest.approx(4.1)


def test_evaluation_after_a_second_optimizers_step_is_cut_out(tr):
    t, steps, between = tr
    opt, opt2, ctx = Opt(), Opt(), Ctx()
    for i in range(4):
        t.backward(i + 0.1, i + 0.2)
        _opt_step(t, opt, i + 0.3, i + 0.4)
        _opt_step(t, opt2, i + 0.4, i + 0.5)
        if i == 2:
            _evaluate(t, ctx, i + 0.6, i + 0.9)
    assert between == [("eval", 2.6, 0.3)]
    assert steps[-1][2] - steps[-1][1] == pytest.approx(0.7)  # 2.4 .. 3.4 less the pass


def test_closure_optimizer_every_region_between_its_steps_is_a_pass(tr):
    """LBFGS: training is inside opt.step(closure); a prediction after every step, at one
    site, is an evaluation each time."""
    t, steps, between = tr
    opt, ctx = Opt(), Ctx()
    t.clock = iter([0.0, 0.1, 1.0, 1.1, 2.0, 2.1]).__next__  # the closure's own clock
    for i in range(3):
        bwd = (i + 0.05, i + 0.08)
        args = t.optimizer_pre(opt, i + 0.0, (opt, lambda b=bwd: t.backward(*b)), None)
        args[0][1]()  # LBFGS calls its closure: forward, backward
        t.optimizer_post(opt, i + 0.4)
        _region(t, ctx, i + 0.5, i + 0.8)
    assert between == [("eval", i + 0.5, 0.3) for i in range(3)]
    assert len(steps) == 3


def test_save_on_another_thread_overlaps(tr):
    t, steps, between = tr
    opt = Opt()
    t.backward(0.1, 0.2)
    _opt_step(t, opt, 0.3, 0.4)
    th = threading.Thread(target=t.saved, args=(0.5, 0.9))
    th.start()
    th.join()
    t.backward(1.0, 1.1)
    _opt_step(t, opt, 1.2, 1.3)
    assert between == [("checkpoint_overlapped", 0.5, 0.4)]
    assert abs(steps[-1][1] - 0.4) < 1e-9  # the step still starts where the last ended


@pytest.mark.parametrize("source", ["backward", "grads"])
def test_a_batch_fetched_ahead_before_training_is_no_step(tr, source):
    """A prefetcher fetches a batch before the loop, then the next one ahead at each step's
    start: a loop without an optimizer (``backward()`` or ``autograd.grad``) counts its
    steps, no more; the first holds both fetches."""
    t, steps, _ = tr
    t.settled = False  # as a run starts: steps of a weaker source held for a while
    train = getattr(t, source)
    t.fetched(0.0, 0.1)  # the prefetcher's constructor
    for i in range(5):
        t.fetched(i + 0.2, i + 0.3)  # the next batch, fetched ahead
        train(i + 0.5, i + 0.6)
    t.flush()
    assert [s[0] for s in steps] == list(range(5))
    assert steps[0][1] == 0.0 and steps[0][3] == pytest.approx(0.2)
    assert steps[1][1] == pytest.approx(1.2)


def test_batches_from_a_producer_thread_are_not_data_wait(tr):
    t, steps, _ = tr
    t.settled = False  # as a run starts: steps of a weaker source held for a while
    opt = Opt()

    def produce(k: int) -> None:
        for i in range(k):
            t.fetched(i * 0.01, i * 0.01 + 0.005)

    th = threading.Thread(target=produce, args=(5,))
    th.start()
    th.join()
    for i in range(3):
        t.backward(1.0 + i, 1.2 + i)
        _opt_step(t, opt, 1.3 + i, 1.4 + i)
    th = threading.Thread(target=produce, args=(3,))
    th.start()
    th.join()
    assert len(steps) == 3
    assert all(s[3] == 0.0 and str(s[3]) == "-0.0" for s in steps)  # not seen: -0.0
