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


def test_no_grad_region_between_optimizer_steps_is_eval(tr):
    t, steps, between = tr
    opt, ctx = Opt(), Ctx()
    t.backward(0.1, 0.2)
    _opt_step(t, opt, 0.3, 0.4)
    t.no_grad(True, ctx, 0.5)  # an estimate_loss() right after the step
    t.no_grad(False, ctx, 1.5)
    t.backward(1.6, 1.7)
    _opt_step(t, opt, 1.8, 1.9)
    assert between == [("eval", 0.4, 1.1)]
    assert abs((steps[-1][2] - steps[-1][1]) - 0.4) < 1e-9  # the step after: 1.5 .. 1.9
    # A region the last step also began with is per-step work (a target network).
    t.no_grad(True, ctx, 2.0)
    t.no_grad(False, ctx, 2.5)
    t.backward(2.6, 2.7)
    _opt_step(t, opt, 2.8, 2.9)
    assert len(between) == 1


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
