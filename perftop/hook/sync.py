"""Sync sites per step, from the sampled dispatch-level detector (``sync_detect``): on a
CPU run, kind ``potential`` on tensors a GPU run would keep on the device; on CUDA, kind
``sync`` where CUDA's sync debug mode, switched on around each call of a sampled step
(``sync_cuda``), confirms it, with the host time blocked. A watched stretch's syncs made
outside training steps (an evaluation or sampling pass) are kept apart, per pass. The
detector steps aside for good once torch.compile is in use (see :func:`compile_guard`).

Settings, read from the environment when torch is imported:

- ``PERFTOP_SYNC``: ``sampled`` (default), ``all`` (the exact mode: the detector on every
  step from step 1 on, so counts and rates are exact, with no sampling error; slow, for
  tests and for exact counts) or ``off`` (no detection at all, CUDA debug mode included).
- ``PERFTOP_SYNC_EARLY``: early steps the detector watches for sure (default 3: steps
  1-3); later steps are watched with a probability that falls from there (see
  :class:`Sampler`), and every watched step is weighed by it, so rates stay unbiased.
- ``PERFTOP_SYNC_EVERY``: the mean gap between later samples (default 200: a step is
  watched with probability 1/200; in a distributed job the same steps on every rank).
- ``PERFTOP_SYNC_SEED``: the session's seed of the draws (hexadecimal), which
  ``perftop run`` sets at random in the job's environment: every rank of a job draws the
  same steps, and each session other steps (a fixed draw read a loop's periodic lines at
  the same wrong rate in every run). Unset: drawn here, or from the rendezvous a
  distributed job's ranks share.
- ``PERFTOP_SYNC_BUDGET_US``: amortized extra µs per step the detector may cost
  (default 0.15, or 0.1% of a step where that is more); the gap between samples grows with
  the measured cost of a sampled step (and of the step before it, primed: see
  ``Detector.prime``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from perftop.events import SyncBatch, SyncInfo
from perftop.hook.gap_bounds import OVERLAPPED
from perftop.hook.pass_meter import cpu_wall, switches
from perftop.hook.state import env_float, env_int
from perftop.hook.sync_collector import Collector
from perftop.hook.sync_sampler import BUDGET_S, Sampler, session_seed, unit
from perftop.wire import SYNC_PAUSED_NOTE


def attach(state: Any, torch: Any) -> Collector | None:
    """Start sync detection as configured; None when ``PERFTOP_SYNC=off``."""
    mode = os.environ.get("PERFTOP_SYNC", "sampled").strip().lower()
    if mode in ("off", "0", "no", "false"):
        return None
    from perftop.hook import frames, sync_cuda, sync_detect, sync_passes

    frames.configure()
    collector = Collector(state.sender.put, lambda: state.sender.pid)
    sampler = Sampler(
        env_int("PERFTOP_SYNC_EARLY", 3, minimum=0) or 0,
        env_int("PERFTOP_SYNC_EVERY", 200, minimum=0) or 0,
        env_float("PERFTOP_SYNC_BUDGET_US", BUDGET_S * 1e6) * 1e-6,
        fixed=(env_int("WORLD_SIZE", 1) or 1) > 1,
        seed=session_seed(),
    )
    sampler.all = mode == "all"
    collector.weight = lambda: sampler.weight
    real = sync_cuda.attach(torch, state)
    detector = sync_detect.make_detector(torch, collector, state, real)
    if detector is None:
        return None
    slot = detector.slot
    info = SyncInfo(
        time.time(),
        state.sender.pid,
        False,  # no longer every step: real syncs are counted in the sampled steps
        True,
        sampler.early,
        sampler.every,
        real is not None and not real.aside,
        sampler.all,
    )
    told = [False]  # sent at the first step: a process that never trains stays silent
    last = [-1]  # the last step index closed: the tracker numbers merged steps again
    tracker = state.tracker
    # Watched steps the tracker still holds (provisional: backward() ends them until an
    # optimizer may show up; accumulation's micro-batches fold into one step then): their
    # batches wait for its verdict. Steps that stand go out as watched; folded ones as
    # unwatched (their syncs counted, no rate: a micro-batch is no step), else the model
    # would count a micro-batch and the step that takes its number after it as one
    # watched step seen twice.
    pending: list[SyncBatch] = []

    def gap_sync(_mark: float, blocked_s: float | None) -> None:
        """A sync seen outside training steps (no batch pending): where it was, for the
        pass's end (pass_open.PassOpen.resumed). The collector's own mark of the sync's
        return is not used: the wall time is read again after the CPU clock (a wait for a
        core that the clock's read ends is the pass's work, not time after it)."""
        if tracker.in_gap and not tracker.pend:
            # the voluntary switches: the training thread's own, else not known (-1)
            n = switches() if threading.get_ident() == tracker.thread else -1
            c, t = cpu_wall()
            state.gap_sync = (t, c, blocked_s or 0.0, n)

    collector.on_add = gap_sync

    def settle_pending(folded: bool) -> None:
        for b in pending:
            state.sender.put(replace(b, sampled=False, weight=1.0) if folded else b)
        pending.clear()

    aside = compile_guard(state, detector, real is not None)
    passes = sync_passes.PassWatch(
        detector,
        collector,
        lambda n: unit(n, sync_passes.SALT, sampler.seed),
        sampler.every,
        lambda: not sampler.all and not aside() and not getattr(state, "capturing", False),
    )
    prev_open = tracker.on_open

    def on_open(kind: str, t0: float) -> None:
        try:
            passes.opened(kind, t0)
        except Exception:
            state.internal_error("sync pass")
        if prev_open is not None:
            prev_open(kind, t0)

    tracker.on_open = on_open

    def guarded(f: Callable[[], None]) -> Callable[[], None]:
        def call() -> None:
            try:
                f()
            except Exception:
                state.internal_error("sync pass")

        return call

    state.pass_maybe, state.pass_refuted = guarded(passes.maybe), guarded(passes.refuted)

    # Intervals outside training steps, for the collector to tell a step's syncs from an
    # evaluation's; then on to what was there before.
    prev_between = tracker.on_between

    def on_between(kind: str, t0: float, length: float, *named: Any) -> None:
        # A save on another thread (an async checkpoint) is no interval of the training
        # thread's: its steps went on through it, and their syncs are theirs. (This call
        # comes on the saving thread, where the detector's mode is no one's to settle.)
        if kind != OVERLAPPED:
            between(kind, t0, length)
        if prev_between is not None:
            prev_between(kind, t0, length, *named)

    def between(kind: str, t0: float, length: float) -> None:
        if detector.active:
            # An evaluation's pass its first batch opened begins at the last step's end
            # (its loader's start is its own time), but its syncs begin at that batch: a
            # log line's .item() after the update (ignite's, the HF Trainer's) is the step's.
            collector.between(kind, t0, length, tracker.gap_seen if t0 == tracker.gap_t0 else t0)
        try:
            passes.closed(kind)
            # after the last step closed (``last`` is where this hook last ran: the sampled
            # steps only, so a pass watched on its own draw after step 60 read step 12)
            passes.ended(max(0, tracker.index - 1, last[0]))
        except Exception:
            state.internal_error("sync pass")
        if slot.busy:  # a safe point for a removal that waits
            try:
                slot.settle()
            except Exception:
                state.internal_error("sync step")

    tracker.on_between = on_between
    perf = time.perf_counter

    def on_step(index: int, t: float) -> int:
        """Returns the next step index that needs this callback."""
        t_in = perf()
        try:
            return _on_step(index, t)
        finally:
            sampler.overhead_s += perf() - t_in

    def _on_step(index: int, t: float) -> int:
        try:
            if not told[0]:
                told[0] = True
                state.sender.put(replace(info, pid=state.sender.pid))
            if passes.watching:  # a pass with no end reported (never so far): its own
                passes.ended(max(0, last[0]))
            passes.refuted()  # a trial still on at a step's end: the step's (never so far)
            watched, primed = detector.active, detector.priming
            if watched:
                detector.stop()
            if index <= last[0] and watched:
                # The tracker folded held steps into this one (the first optimizer step
                # after a GAN's two backward() calls, or accumulation's micro-batches): a
                # stretch watched from among them holds part of a step, not a whole one.
                collector.drop()
                watched = False
            if pending and (index <= last[0] or tracker.settled):
                settle_pending(folded=index <= last[0])
            last[0] = index
            held = watched and not tracker.settled  # a provisional step: its verdict first
            collector.flush(index, watched, pending.append if held else None)
            capturing = getattr(state, "capturing", False)  # a capture: the detector steps aside
            if sampler.closed(index, t, watched, primed) and not aside() and not capturing:
                collector.since = t
                detector.start()  # a primed mode starts counting where it is
            elif primed:
                detector.stop()
            if sampler.primes(index) and not aside() and not capturing:
                detector.prime()
            slot.check(index)  # perftop's modes on the stack: the ones it pushed, or a Note
            if slot.busy:  # the mode is on or was: the next step end checks again
                return index + 1
            return sampler.wake_at(index)
        except Exception:
            state.internal_error("sync step")
            return index + 1

    tracker.on_step = on_step

    def at_exit() -> None:
        settle_pending(folded=False)  # the tracker's flush released what it held, as steps
        collector.flush_exit(max(0, last[0]), detector.active)

    state.sync_exit = at_exit

    def undo() -> None:
        tracker.on_step = None
        state.sync_exit = state.pass_maybe = state.pass_refuted = None
        tracker.on_between = prev_between
        tracker.on_open = prev_open
        detector.stop()
        slot.disarm()

    state.undo.append(undo)
    os.register_at_fork(after_in_child=detector.forget)
    return collector


def compile_guard(state: Any, detector: Any, cuda_debug: bool) -> Callable[[], bool]:
    """The detector steps aside for good once torch.compile is in use: dynamo guards on
    the function-mode stack, so a mode pushed on some steps only would make it recompile,
    and a mode on the stack while it traces would be traced. Seen without replacing
    anything of torch's (compile_watch.py): when a ``torch.compile(model)`` wrapper is
    made, and when dynamo starts compiling a frame, before it snapshots this thread's
    function-mode stack (``convert_frame.compile_inner`` runs the start callbacks first),
    so the mode of a watched step leaves the stack there, where that is safe
    (``sync_stack.Slot.safe``: a compile started inside a torch function's dispatch or
    inside autograd's engine traces the mode; one on another thread does not see this
    thread's stack, but may see the trap, the one-shot global forward pre-hook that takes
    the mode off at this thread's next module call); or else from dynamo's counters before
    each sample (a compile that dynamo started while its callbacks were cleared). Returns
    the check made before each sample."""
    aside = [detector is None]
    watch = getattr(state, "compiles", None)

    def step_aside(why: str) -> None:
        if aside[0]:
            return
        aside[0] = True
        detector.stop()  # off the stack now where that is safe, else at a safe point
        # A change still waiting (its trap, a global forward pre-hook: a wrapper's call
        # would warn about it, dynamo would trace it) is made here too where that is safe.
        detector.slot.settle()
        rest = " (real syncs are still counted by CUDA's sync debug mode)" if cuda_debug else ""
        state.sender.note(
            "info",
            f"{SYNC_PAUSED_NOTE}{why}; its TorchFunctionMode would make dynamo "
            f"recompile, so potential sync sites are no longer sampled{rest}",
        )

    def check() -> bool:
        if not aside[0]:
            if watch is not None:
                watch.ensure()  # a compile in the sample is seen as it starts
            utils = sys.modules.get("torch._dynamo.utils")
            frames = getattr(utils, "counters", {}).get("frames") if utils else None
            if frames and frames.get("total"):
                step_aside("torch.compile (dynamo) is in use")
        return aside[0]

    if watch is not None and detector is not None:
        watch.listen(
            lambda: step_aside("torch.compile is in use (a compiled model)"),
            lambda: step_aside("torch.compile is in use (dynamo compiles)"),
        )
    return check
