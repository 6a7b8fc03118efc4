"""Step boundaries from whatever the loop reveals, checked on the tracker alone: the
pure-Python reference and the C one (``tracker_cls`` in conftest.py), same assertions."""

from __future__ import annotations

import pytest


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self, dt: float) -> tuple[float, float]:
        t0 = self.t
        self.t += dt
        return t0, self.t


@pytest.fixture
def _tracker(tracker_cls):
    def make():
        steps: list[tuple] = []
        return tracker_cls(steps.append), steps

    return make


def test_optimizer_loop_with_loader(_tracker):
    tr, steps = _tracker()
    c = Clock()
    for _ in range(3):
        tr.fetched(*c(0.5))  # data wait
        c(0.1)  # forward
        tr.backward(*c(0.2))
        t0, _ = c(0.05)
        tr.optimizer_pre(t0)
        tr.optimizer_post(1, c.t)
    assert len(steps) == 3
    idx, t0, t1, data, bwd, opt, phases, source = steps[1]
    assert idx == 1 and source == "optimizer"
    assert round(t1 - t0, 6) == 0.85 and round(data, 6) == 0.5 and round(bwd, 6) == 0.2
    assert round(opt, 6) == 0.05


def test_first_iteration_is_not_counted_twice_when_optimizer_shows_up_late(_tracker):
    """Backward is seen before the first optimizer step; the step is closed once."""
    tr, steps = _tracker()
    c = Clock()
    for _ in range(4):
        c(0.1)
        tr.backward(*c(0.1))
        t0, t1 = c(0.1)
        tr.optimizer_pre(t0)
        tr.optimizer_post(7, t1)
    assert [s[0] for s in steps] == [0, 1, 2, 3]


def test_manual_sgd_with_loader_keeps_the_update_in_its_step(_tracker):
    tr, steps = _tracker()
    c = Clock()
    for _ in range(3):
        tr.fetched(*c(0.3))
        tr.backward(*c(0.2))
        c(0.4)  # the hand-written update
    tr.flush()
    assert len(steps) == 3
    assert [round(s[2] - s[1], 6) for s in steps[:2]] == [0.9, 0.9]
    assert all(s[7] == "backward" for s in steps)


def test_loader_only_loop(_tracker):
    tr, steps = _tracker()
    c = Clock()
    for _ in range(5):
        tr.fetched(*c(0.1))
        c(0.2)
    t0, t1 = c(0.01)  # the StopIteration call closes the last step
    tr.fetched(t0, t1, got_batch=False)
    assert steps == []  # held back until the loop shows whether an optimizer exists
    tr.flush()
    assert len(steps) == 5 and all(s[7] == "loader" for s in steps)


def test_gan_two_optimizers_one_step_per_iteration(_tracker):
    tr, steps = _tracker()
    c = Clock()
    for _ in range(3):
        tr.fetched(*c(0.1))
        for opt in (1, 2):  # discriminator, then generator
            tr.backward(*c(0.1))
            t0, t1 = c(0.1)
            tr.optimizer_pre(t0)
            tr.optimizer_post(opt, t1)
    assert len(steps) == 3
    assert round(steps[1][5], 6) == 0.2  # both optimizers' time in the optimizer phase


def test_gradient_accumulation_counts_optimizer_steps(_tracker):
    tr, steps = _tracker()
    c = Clock()
    for _ in range(2):
        for _ in range(4):
            tr.fetched(*c(0.1))
            tr.backward(*c(0.1))
        t0, t1 = c(0.1)
        tr.optimizer_pre(t0)
        tr.optimizer_post(1, t1)
    assert len(steps) == 2 and round(steps[0][4], 6) == 0.4


def test_explicit_steps_win_and_phases_are_kept(_tracker):
    tr, steps = _tracker()
    c = Clock()
    for _ in range(3):
        tr.phase("forward", *c(0.2))
        tr.backward(*c(0.1))
        t0, t1 = c(0.1)
        tr.optimizer_pre(t0)
        tr.optimizer_post(1, t1)
        tr.explicit(c.t)
    # The optimizer closed the first step before the first explicit call was seen.
    assert [s[7] for s in steps[-2:]] == ["explicit", "explicit"]
    assert round(steps[-1][6]["forward"], 6) == 0.2


def test_held_steps_are_released_after_the_hold_limit(_tracker):
    tr, steps = _tracker()
    c = Clock()
    for i in range(70):
        tr.fetched(*c(0.01))
        tr.backward(*c(0.01))
        if i == 63:
            assert steps == []  # 63 closed steps held, none emitted yet
    # Released as they were once the hold was full (no optimizer came), then emitted live.
    assert [s[0] for s in steps] == list(range(69))
