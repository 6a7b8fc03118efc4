"""The step tracker's rare paths: held steps, a second or new optimizer, timed closures.
Plain Python even when steps.py is compiled: each runs once, or once per optimizer step
of a closure optimizer or a GAN, not on every batch."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from perftop.wire import (
    REC_BWD,
    REC_DATA,
    REC_INDEX,
    REC_OPT,
    REC_PHASES,
    REC_T0,
    STEP_SOURCES,
)

if TYPE_CHECKING:  # the tracker whose rare paths these are (no import at run time)
    from perftop.hook.shape import Tracker


def weak(obj: Any) -> Any:
    """A weak reference, None where ``obj`` takes none: a freed object's address may be
    reused by the next one, so identity is never kept as an ``id()``."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


def loader_of(tr: Tracker, it: Any) -> Any:
    """Which loader a DataLoader iterator met for the first time iterates (its number, from
    ``tr.on_iter``; torch_patch.py numbers loaders at their iterators' first batch), None
    where not known."""
    f = tr.on_iter
    return f(it) if f is not None else None


def ref(opt: Any) -> Any:
    """A weak reference to an optimizer; one that takes none (torch's do) is held."""
    r = weak(opt)
    return r if r is not None else (lambda: opt)


def loader_seen(tr: Tracker, loader: Any, got: bool, t1: float) -> None:
    """A batch of ``loader`` before any training: a loader for training to confirm. Its
    end (``StopIteration``: ``got`` False, at ``t1``) before any training ends a pass over
    it: an evaluation before the first step, fetched with grad on and run under
    ``no_grad`` (MONAI's ``ValidationHandler(exec_at_start=True)``), or the whole job
    where it never trains (inference: its batches are its steps). So the loader is no
    training loader, and where training comes, what was fetched by then is no step's
    (:func:`trim_before_training`)."""
    seen = tr.fetch_loader
    if not got:
        if seen is not None and loader in seen:
            seen.remove(loader)  # ([] still says: training starts, gaps.training)
        tr.pre_end = t1
        return
    if seen is None:
        tr.fetch_loader = [loader]
    elif loader not in seen:
        seen.append(loader)


def trim_before_training(tr: Tracker) -> None:
    """Training starts: the batches of a loader that ended before it (``pre_end``) were a
    pass's, no step's (the first step held the whole evaluation, 284 of its 406 ms in a
    MONAI run, and its batches as data wait). Steps held before training are dropped up
    to there, the running one starts there, and the ones kept are numbered anew."""
    end, tr.pre_end = tr.pre_end, -1.0
    if end < 0.0:
        return
    held = tr.held
    kept = [h for h in held if h[REC_T0] >= end]
    if len(kept) < len(held):
        base = held[0][REC_INDEX]
        tr.held = [(base + k, *h[1:]) for k, h in enumerate(kept)]
        tr.index = base + len(kept)
        tr.step_hook_at = 0  # the step callback hears these indices again
        tr.held_fetch = tr.held_fetch and bool(kept)
    if tr.running and tr.start < end:
        tr.data = max(0.0, tr.data - (end - tr.start))  # the loader's end: the pass's
        tr.start = end


def settle(tr: Tracker) -> None:
    tr.settled = True
    if tr.on_settle is not None:
        tr.on_settle()


def release(tr: Tracker) -> None:
    """No optimizer showed up in time: the weaker source's steps stand as they are."""
    settle(tr)
    held, tr.held = tr.held, []
    tr.held_fetch = False
    for index, t0, t1, data, bwd, opt, phases, source in held:  # wire.REC_* order
        tr.push(index, t0, t1, data, bwd, opt, phases, STEP_SOURCES.index(source))


def merge_held(tr: Tracker, strongest: bool = True) -> None:
    """A stronger source appeared: the held steps were parts of the current step. An
    optimizer or ``perftop.step()`` settles the steps (``strongest``); a first
    ``backward()`` after DataLoader batches only merges them (batches fetched ahead before
    any training, by a prefetcher, are no steps) and an optimizer may still come."""
    if strongest:
        settle(tr)
    held, tr.held = tr.held, []
    if not held:
        return
    if tr.held_fetch:  # a part fetched: the step's data wait is its batches' (the HF
        tr.has_fetch = True  # Trainer fetches a step's micro-batches before its forwards)
        tr.held_fetch = False
    tr.step_hook_at = 0  # the step callback hears this index again: it was renumbered
    tr.index = held[0][REC_INDEX]
    tr.start = held[0][REC_T0]
    tr.running = True
    for h in held:
        tr.data += h[REC_DATA]
        tr.bwd += h[REC_BWD]
        tr.opt += h[REC_OPT]
        for name, dt in (h[REC_PHASES] or {}).items():
            if tr.phases is None:
                tr.phases = {}
            tr.phases[name] = tr.phases.get(name, 0.0) + dt


def train_thread(tr: Tracker, tid: int) -> None:
    """Training activity on thread ``tid``, another than the last one seen (or the first)."""
    first = tr.thread == 0
    tr.thread = tid
    if not first or tr.fetch_thread in (0, tid):
        return
    # The batches so far came from another thread (a producer filling a queue): they
    # were prefetched, and what the loop waited on is not seen (its data wait is absent).
    tr.blind = True
    held, tr.held = tr.held, []
    tr.held_fetch = False
    if held:
        tr.index, tr.start, tr.running = held[0][REC_INDEX], held[0][REC_T0], True
    tr.data = 0.0
    tr.has_fetch = False
    if tr.mode == 1:  # LOADER: those batches were no steps of this loop
        tr.mode = 0


def other_optimizer(tr: Tracker, opt: Any, t1: float) -> None:
    """``opt`` stepped and is not the one whose steps close steps."""
    cur = tr.primary() if tr.primary is not None else None
    if cur is None:  # the first optimizer, or the last one was freed: this one now
        tr.primary = ref(opt)
        tr.mark = None
        tr.close(t1)
        return
    m = tr.mark
    if m is not None and m[0]() is opt:
        # Two steps of this optimizer and none of the primary's: it replaced the primary.
        # The step ended at its previous step, with the phases it had then.
        tr.primary = m[0]
        tr.mark = None
        _, t, data, bwd, o, hole = m
        rest = (tr.data - data, tr.bwd - bwd, tr.opt - o, tr.phases, tr.hole - hole)
        tr.data, tr.bwd, tr.opt, tr.phases, tr.hole = data, bwd, o, None, hole
        tr.close(t)
        tr.data, tr.bwd, tr.opt, tr.phases, tr.hole = rest
        tr.close(t1)
    else:  # a GAN's second optimizer, so far: its time is in this step's optimizer phase
        tr.mark = (ref(opt), t1, tr.data, tr.bwd, tr.opt, tr.hole)
        if tr.on_arm is not None:
            # An iteration may end here (each optimizer after its own backward: SAC, a
            # GAN): the next forward with grad off may begin a pass (first_forward.may_begin)
            # though a DataLoader's fetches leave the hook unarmed after a backward.
            tr.on_arm()


def closure_args(tr: Tracker, args: Any, kwargs: Any) -> Any:
    """``opt.step(closure)``: the arguments with the closure timed, or None. The step's
    forwards are its closures', inside the optimizer step: the wait before them (behind a
    feeder, first_forward.py) is what came before the step, taken now (``on_closure``)."""
    if len(args) > 1 and args[1] is not None:
        new = (args[0], timed_closure(tr, args[1]), *args[2:]), kwargs
    elif kwargs and kwargs.get("closure") is not None:
        new = args, {**kwargs, "closure": timed_closure(tr, kwargs["closure"])}
    else:
        return None
    if tr.on_closure is not None:
        tr.on_closure()
    return new


def timed_closure(tr: Tracker, closure: Any) -> Any:
    """The closure's forward and backward are the step's, not the optimizer's: its time
    is taken out of the optimizer phase."""
    clock = tr.clock

    def timed(*a: Any, **k: Any) -> Any:
        t = clock()
        tr.closure_depth += 1
        try:
            return closure(*a, **k)
        finally:
            tr.closure_depth -= 1
            tr.closure_s += clock() - t

    return timed
