"""What the tracker puts between torch and the user's loop: the pass-through around
``backward()`` and ``DataLoader.__next__``, the optimizer hooks, and the grad-mode read. In
both builds (plain Python, and the C helpers of the compiled one) the user's call gets its
own result and its own exceptions, and nothing of perftop's reaches it."""

from __future__ import annotations

import functools
import inspect
import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader

from perftop.hook import torch_patch


class Boom(Exception):
    pass


def _tracker(tracker_cls):
    out: list = []
    return tracker_cls(out.append), out


def test_backward_passthrough_forwards_arguments_result_and_exceptions(tracker_cls):
    tr, _ = _tracker(tracker_cls)
    seen = []

    def orig(*args, **kwargs):
        seen.append((args, kwargs))
        if kwargs.get("fail"):
            raise Boom("from the user's code")
        return "result"

    w = functools.update_wrapper(tr.wrap_backward(orig), orig)
    assert w(1, 2, inputs=3) == "result"
    assert seen[-1] == ((1, 2), {"inputs": 3})
    assert tr.has_bwd and tr.bwd > 0.0  # timed
    with pytest.raises(Boom, match="user's code"):
        w(fail=True)
    assert w.__wrapped__ is orig and w.__name__ == "orig"
    assert inspect.signature(w) == inspect.signature(orig)


def test_a_broken_tracker_never_reaches_the_users_call(tracker_cls):
    tr, _ = _tracker(tracker_cls)
    errors = []
    tr.on_error = errors.append

    def broken(*_):
        raise RuntimeError("a perftop bug")

    tr.on_close = broken  # every step end now fails inside the tracker
    w = tr.wrap_backward(lambda: 7)
    assert [w(), w(), w()] == [7, 7, 7]  # backward steps close lazily: the 2nd and 3rd fail
    assert errors == ["backward", "backward"]

    def orig_next(it):
        raise StopIteration  # the user's own exception, with perftop's failing behind it

    nxt = tr.wrap_next(orig_next, lambda: True)
    tr.mode = 1  # steps of the loader: this fetch closes the open step, which fails
    tr.has_fetch = True
    with pytest.raises(StopIteration):
        nxt(object())
    assert errors[-1] == "DataLoader.__next__"

    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    tr.held = [("not a step",)]  # merging held steps into the optimizer's step fails
    assert tr.opt_pre_hook(opt, (opt,), {}) is None
    assert tr.opt_post_hook(opt, (opt,), {}) is None  # closes the step: on_close fails
    assert errors[-2:] == ["optimizer pre-hook", "optimizer post-hook"]


def test_an_interrupt_inside_the_tracker_is_passed_on(tracker_cls):
    """Ctrl-C while perftop's code runs must stop the job as it would have anyway."""
    tr, _ = _tracker(tracker_cls)

    def interrupted(*_):
        raise KeyboardInterrupt

    tr.on_close = interrupted
    w = tr.wrap_backward(lambda: 7)
    w()
    with pytest.raises(KeyboardInterrupt):
        w()
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    tr.opt_pre_hook(opt, (opt,), {})
    with pytest.raises(KeyboardInterrupt):
        tr.opt_post_hook(opt, (opt,), {})


def test_next_passthrough_binds_as_a_method_and_passes_stop_iteration(tracker_cls):
    tr, _ = _tracker(tracker_cls)

    class It:
        def __init__(self):
            self.left = 2

        def __iter__(self):
            return self

    def orig(self):
        if not self.left:
            raise StopIteration
        self.left -= 1
        return self.left

    It.__next__ = tr.wrap_next(orig, torch.is_grad_enabled)
    it = It()
    assert it.__next__() == 1  # bound through the descriptor
    assert list(it) == [0]  # the for loop's slot, then StopIteration
    assert tr.index == 2  # each batch closed the step before it; the last call too


def test_optimizer_hooks_take_torchs_call_and_ignore_other_shapes(tracker_cls):
    tr, out = _tracker(tracker_cls)
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    assert tr.opt_pre_hook(opt, (opt,), {}) is None
    assert tr.opt_post_hook(opt, (opt,), {}) is None
    assert len(out) == 1 and tr.primary() is opt  # the first optimizer closed a step
    assert out[0][5] > 0.0  # with its optimizer phase
    assert tr.opt_pre_hook(opt) is None  # a call of another shape: no effect, no error


def test_grad_mode_read_agrees_with_torch_in_every_mode_and_thread(tracker_cls):
    tr, _ = _tracker(tracker_cls)
    tr.wrap_next(lambda it: None, torch.is_grad_enabled)
    torch_patch._fast_grad(torch, tr)  # the compiled build reads c10's flag in C from here
    compiled = type(tr).__module__ == "perftop.hook._steps_fast"
    assert tr.fast_grad(str(torch_patch.libc10(torch))) == compiled  # found in a real torch

    def modes() -> list[bool]:
        got = [tr.grad()]
        for mode in (torch.no_grad, torch.enable_grad, torch.inference_mode):
            with mode():
                got.append(tr.grad())
        with torch.no_grad(), torch.enable_grad():
            got.append(tr.grad())
        return got

    assert modes() == [True, False, True, False, True]
    in_thread: list = []
    t = threading.Thread(target=lambda: in_thread.extend(modes()))
    t.start()
    t.join()
    assert in_thread == [True, False, True, False, True]


def test_evaluation_under_no_grad_is_seen_through_the_c_grad_read(tracker_cls):
    tr, _ = _tracker(tracker_cls)
    kinds: list = []
    tr.on_between = lambda kind, t0, length: kinds.append(kind)
    tr.wrap_next(lambda it: None, torch.is_grad_enabled)
    torch_patch._fast_grad(torch, tr)
    loader = DataLoader(list(range(4)))
    for _ in range(3):
        it = iter(loader)
        tr.fetched(0.0, 0.0, True, 0, tr.grad())
        tr.backward(0.0, 0.0)
        with torch.no_grad():
            tr.fetched(0.0, 0.0, True, 0, tr.grad())
        del it
    tr.fetched(1.0, 1.0, True, 0, tr.grad())
    assert "eval" in kinds


def test_each_iterators_loader_is_read_once_and_a_freed_ones_address_is_not_trusted(
    tracker_cls,
):
    tr, _ = _tracker(tracker_cls)
    reads: list = []

    class It:
        def __init__(self, loader: int) -> None:
            self.loader = loader

    def loader_of(it: It) -> int:  # as torch_patch.py's: each ask counted
        reads.append(it.loader)
        return it.loader

    tr.on_iter = loader_of
    nxt = tr.wrap_next(lambda it: it.loader, lambda: True)
    train = It(0)
    for t in range(5):  # training batches: the tracker asks on the first only
        assert nxt(train) == 0
        tr.backward(float(t), float(t))
    assert reads == [0] and not tr.pend
    address = id(train)
    del train  # its memory is free: the next iterator of the same size may take it
    keep = []
    other = It(1)
    while id(other) != address and len(keep) < 10_000:
        keep.append(other)
        other = It(1)
    assert id(other) == address  # a new iterator, of another loader, at the same address
    nxt(other)
    assert reads == [0, 1]  # its own loader, not the cached one
    assert tr.pend  # a loader that never fed training: an evaluation or the next training


def test_the_pass_throughs_clock_is_perf_counters(tracker_cls):
    """The C build reads the clock itself; its stamps must lie on perf_counter's line,
    which the sender turns into epoch time and closures and torch.save stamp with."""
    tr, _ = _tracker(tracker_cls)
    w = tr.wrap_backward(lambda: None)
    before = time.perf_counter()
    w()
    after = time.perf_counter()
    assert before <= tr.start <= tr.last_end <= after


def test_the_training_thread_is_named_as_threading_names_it(tracker_cls):
    """The compiled build reads the thread's identity in C; the feeder timing and the
    sync detector compare it with ``threading.get_ident()``."""
    tr, _ = _tracker(tracker_cls)
    w = tr.wrap_backward(lambda: None)
    seen = []

    def train():
        w()
        seen.append(threading.get_ident())

    t = threading.Thread(target=train)
    t.start()
    t.join()
    assert tr.thread == seen[0] != threading.get_ident()
