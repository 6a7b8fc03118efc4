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

import hashlib
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from perftop.events import SyncBatch, SyncInfo
from perftop.hook.frames import Where
from perftop.hook.state import env_float, env_int
from perftop.wire import SYNC_PAUSED_NOTE

# op, kind, then where: (file, line, function, lib_file, lib_line, lib_function, package)
SiteKey = tuple[str, str, Where]
# What sampling may cost a step, amortized: 0.15 µs (0.1% of a tight 165 µs CPU step,
# where the hook's whole cost is meant to stay under 3 µs; at 0.5 µs, sampling cost that
# step ~0.9 µs whole process, a third of it) ...
BUDGET_S = 0.15e-6
FRACTION = 0.001  # ... or this fraction of a step, whichever is more
WARM = 4  # steps before a sample that go through the sampler, to learn the base duration


M64 = (1 << 64) - 1


def unit(index: int, salt: int, seed: int = 0) -> float:
    """A number in [0, 1) drawn from the step index and the session's seed (splitmix64):
    the same on every rank, unrelated to any period of the job's own work, and another
    draw in each session."""
    h = (
        index * 0x9E3779B97F4A7C15 + salt * 0xD1B54A32D192ED03 + seed * 0xA0761D6478BD642F + 1
    ) & M64
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & M64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & M64
    return ((h ^ (h >> 31)) >> 11) / 2**53


def session_seed() -> int:
    """The seed of the sampler's draws: ``PERFTOP_SYNC_SEED``, else one every rank of a
    distributed job derives from its rendezvous, else a random one."""
    text = os.environ.get("PERFTOP_SYNC_SEED", "").strip()
    try:
        return int(text, 16) & M64
    except ValueError:
        pass
    if (env_int("WORLD_SIZE", 1) or 1) > 1:
        keys = ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")
        shared = "\0".join(os.environ.get(k, "") for k in keys).encode()
        return int.from_bytes(hashlib.sha256(shared).digest()[:8], "little")
    return int.from_bytes(os.urandom(8), "little")


class Sampler:
    """Which steps the detector watches: each step by a draw with a known probability,
    so that the per-step rates are unbiased whatever a line's period (a log line every 10
    steps, an image saved every 63).

    Step ``j`` is watched with probability ``p(j)``: 1 for steps 1..``early`` (sites are
    learnt at once), then ``(early / j)**2`` (a short run still gets a few samples) down
    to ``1 / gap``: ``gap`` is ``every``, or more when the measured cost of a sample needs
    it to keep the amortized cost within the budget. A watched step carries the weight
    ``1 / p(j)`` (:attr:`weight`, sent with its ``SyncBatch``): the model's rates are the
    weighed means (each watched step stands for the steps it was drawn among), so the
    early steps count as themselves only. All mode: every step, weight 1.

    The draws come from a hash of the step index and the session's ``seed`` (a geometric
    jump to the next watched step, thinned where ``p`` falls), never from the clock. ``fixed`` (a distributed job:
    ``WORLD_SIZE`` > 1): the gap is ``every`` whatever this rank's timings, so every rank
    watches the same steps; a sampled step on one rank would otherwise stall every rank
    at the next collective, and the job would pay about world size times the budget.
    """

    def __init__(
        self,
        early: int = 3,
        every: int = 200,
        budget_s: float = BUDGET_S,
        fixed: bool = False,
        seed: int = 0,
    ) -> None:
        self.early = early
        self.seed = seed & M64
        self.every = max(1, every)
        self.budget_s = budget_s
        self.fixed = fixed
        self.all = False
        self.prev: tuple[int, float] | None = None  # the last step closed: index, end
        self.base: float | None = None  # EMA of unwatched step durations
        self.floor = 1.0 / self.every  # the lowest probability of a watch, 1 / gap
        self.weight = 1.0  # of the step the last :meth:`closed` said is watched
        self.next_at, self.next_w = self.draw(early + 1)
        # Time spent in the per-step callback since the last sample (its own bookkeeping,
        # and stopping the detector): also paid for out of the budget.
        self.overhead_s = 0.0

    def p(self, index: int) -> float:
        """The probability that step ``index`` is watched."""
        if index <= self.early:
            return 1.0
        return min(1.0, max(self.floor, (self.early / index) ** 2))

    def draw(self, start: int) -> tuple[int, float]:
        """The first watched step from ``start`` on, and its weight."""
        j = start - 1
        while True:
            pmax = self.p(j + 1)  # p never grows with the index: thin from the next one's
            if pmax >= 1.0:
                j += 1
            else:
                u = 1.0 - unit(j, 1, self.seed)  # in (0, 1]
                j += 1 + int(math.log(u) / math.log1p(-pmax))
            pj = self.p(j)
            if pj >= pmax or unit(j, 2, self.seed) * pmax < pj:
                return j, 1.0 / pj

    def closed(self, index: int, t: float, watched: bool, primed: bool = False) -> bool:
        """Step ``index`` ended at ``t`` (``primed``: the detector learnt marks in it);
        is step ``index + 1`` watched?"""
        prev = self.prev
        dur = t - prev[1] if prev is not None and prev[0] == index - 1 else None
        self.prev = (index, t)
        if watched and index > self.early:  # the early samples run while torch warms up
            gap = self.every if self.fixed or dur is None else self.gap(dur)
            self.floor = 1.0 / gap
        elif primed:  # its extra time is the sample's, paid out of the same budget
            if dur is not None and self.base is not None:
                self.overhead_s += max(0.0, dur - self.base)
        elif dur is not None and not watched and index > 0:
            b = self.base
            self.base = dur if b is None else b + 0.1 * (dur - b)
        nxt = index + 1
        if self.all or nxt <= self.early:
            self.weight = 1.0
            return True
        if self.next_at < nxt:  # drawn and gone (watched, or passed while aside)
            self.next_at, self.next_w = self.draw(nxt)
        self.weight = self.next_w
        return nxt == self.next_at

    def primes(self, index: int) -> bool:
        """Whether step ``index + 1``, the one before a watched step, learns marks."""
        return not self.all and self.next_at == index + 2 and index + 2 > self.early

    def wake_at(self, index: int) -> int:
        """The next step whose end needs the callback (it decides the step after it, and
        primes the one before a watched step), a few steps earlier to learn the base
        duration unless the schedule is fixed."""
        if self.all or index + 2 < self.early:
            return index + 1
        return max(index + 1, self.next_at - 2 - (0 if self.fixed else WARM))

    def gap(self, watched_dur: float) -> int:
        base = self.base
        if base is None:
            return self.every
        extra = max(0.0, watched_dur - base) + self.overhead_s
        self.overhead_s = 0.0
        allowed = max(self.budget_s, FRACTION * base)
        return max(self.every, min(1_000_000, math.ceil(extra / allowed - 1e-9)))


class Collector:
    """Syncs seen in a watched stretch (a step, and any time between steps inside it),
    each with the time it was seen; split at the step end into the step's own and those
    made between steps (inside the intervals the tracker reported: an evaluation or
    sampling pass). The training thread only appends to a list."""

    def __init__(self, put: Callable[[Any], None], pid: Callable[[], int]) -> None:
        self.put = put
        self.pid = pid
        self.log: list[tuple[float, SiteKey, int, float | None]] = []
        self.gaps: list[tuple[str, float, float]] = []  # kind, t0, t1 (perf_counter)
        self.since = 0.0  # when the detector started: passes that began before are partial
        self.weight: Callable[[], float] = lambda: 1.0  # the watched step's (Sampler.weight)
        self.on_add: Callable[[float, float | None], None] | None = None  # (t, blocked_s)

    @property
    def counts(self) -> dict[SiteKey, int]:
        """Every site seen since the last flush, and its count."""
        out: dict[SiteKey, int] = {}
        for _, site, n, _ in self.log:
            out[site] = out.get(site, 0) + n
        return out

    def add(self, site: SiteKey, blocked_s: float | None = None, n: int = 1) -> None:
        t = time.perf_counter()
        self.log.append((t, site, n, blocked_s))
        if self.on_add is not None:
            self.on_add(t, blocked_s)

    def between(self, kind: str, t0: float, length: float) -> None:
        """An interval outside training steps, as the tracker reports it."""
        self.gaps.append((kind, t0, t0 + length))

    def _take(self) -> tuple[dict[SiteKey, list[Any]], dict[SiteKey, list[Any]], int]:
        """The stretch's syncs since the last flush, split into a step's own and those
        inside the intervals between steps, and the passes it held whole (intervals other
        than checkpoints: a gap with both is reported as two); the log emptied."""
        log, gaps = self.log, self.gaps
        self.log, self.gaps = [], []
        inside: dict[SiteKey, list[Any]] = {}
        outside: dict[SiteKey, list[Any]] = {}
        for t, key, n, blocked in log:
            out = any(g0 <= t <= g1 for _, g0, g1 in gaps)
            acc = (outside if out else inside).setdefault(key, [0, None])
            acc[0] += n
            if blocked is not None:
                acc[1] = (acc[1] or 0.0) + blocked
        since = self.since
        passes = len({g0 for k, g0, _ in gaps if k != "checkpoint" and g0 >= since})
        return inside, outside, passes

    def flush(self, step: int, sampled: bool, put: Callable[[Any], None] | None = None) -> None:
        """The stretch's batch, to ``put`` where given (else sent)."""
        if not self.log and not sampled:
            self.gaps = []
            return
        inside, outside, passes = self._take()
        weight = self.weight() if sampled else 1.0
        (put or self.put)(
            SyncBatch(self.pid(), step, sampled, _sites(inside), _sites(outside), passes, weight)
        )

    def drop(self) -> None:
        """Forget what this stretch saw (a part of a step or of a pass: no whole one)."""
        self.log.clear()
        self.gaps.clear()

    def flush_pass(self, step: int) -> None:
        """A pass watched on its own draw (``sync_passes``) ended: its syncs, as no
        watched step's (a sync after it, the next step's wait for its batch, is dropped)."""
        _inside, outside, passes = self._take()
        self.put(SyncBatch(self.pid(), step, False, (), _sites(outside), passes))

    def flush_exit(self, step: int) -> None:
        """At exit: the syncs of passes after the last step (a final test), which no later
        step end flushes. Only those between steps go out, with no watched step: a stretch
        after the last step is no step, and the job's per-step rates stay as they were."""
        _inside, outside, passes = self._take()
        if outside:
            self.put(SyncBatch(self.pid(), step, False, (), _sites(outside), passes))


def _sites(acc: dict[SiteKey, list[Any]]) -> tuple[Any, ...]:
    sites = []
    for (op, kind, w), (n, blocked) in acc.items():
        site = (op, w[0], w[1], w[2], kind, n, blocked)
        sites.append(site if w[6] is None else (*site, *w[3:]))  # library detail
    return tuple(sites)


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

    def gap_sync(t: float, blocked_s: float | None) -> None:
        """A sync seen outside training steps (no batch pending): where it was, for the
        pass's end (first_forward.FirstForward.resumed)."""
        if tracker.in_gap and not tracker.pend:
            state.gap_sync = (t, time.thread_time(), blocked_s or 0.0)

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

    # Intervals outside training steps, for the collector to tell a step's syncs from an
    # evaluation's; then on to what was there before.
    prev_between = tracker.on_between

    def on_between(kind: str, t0: float, length: float, *named: Any) -> None:
        if detector.active:
            collector.between(kind, t0, length)
        try:
            passes.closed(kind)
            passes.ended(max(0, last[0]))
        except Exception:
            state.internal_error("sync pass")
        if slot.busy:  # a safe point for a removal that waits
            try:
                slot.settle()
            except Exception:
                state.internal_error("sync step")
        if prev_between is not None:
            prev_between(kind, t0, length, *named)

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
        collector.flush_exit(max(0, last[0]))

    state.sync_exit = at_exit

    def undo() -> None:
        tracker.on_step = None
        state.sync_exit = None
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
