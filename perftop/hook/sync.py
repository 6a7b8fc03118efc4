"""Sync sites per step: one collector fed by the CUDA sync debug mode (every step, kind
``sync``) and by the sampled dispatch-level detector (kind ``potential``).

Settings, read from the environment when torch is imported:

- ``PERFTOP_SYNC``: ``sampled`` (default), ``all`` (detector on every step: slow, for
  debugging) or ``off`` (no detection at all, CUDA debug mode included).
- ``PERFTOP_SYNC_EARLY``: early steps the detector watches (default 3: steps 1-3).
- ``PERFTOP_SYNC_EVERY``: fewest steps between later samples (default 200).
- ``PERFTOP_SYNC_BUDGET_US``: amortized extra µs per step the detector may cost
  (default 1); the gap between samples grows with the measured cost of a sampled step.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import replace
from types import FrameType
from typing import Any

from perftop.events import SyncBatch, SyncInfo
from perftop.hook.frames import first_user_frame, op_at
from perftop.hook.state import env_int

SiteKey = tuple[str, str, int, str, str]  # op, file, line, function, kind
FRACTION = 0.002  # ... or this fraction of a step, whichever is more
WARM = 4  # steps before a sample that go through the sampler, to learn the base duration


class Sampler:
    """Which steps the detector watches: ``early`` steps after the first, then one step
    when the amortized cost of the last sample has been paid for."""

    def __init__(self, early: int = 3, every: int = 200, budget_s: float = 1e-6) -> None:
        self.early = early
        self.every = max(1, every)
        self.budget_s = budget_s
        self.all = False
        self.n = 0  # steps closed so far
        self.prev_t: float | None = None
        self.base: float | None = None  # EMA of unwatched step durations
        self.next_at = early + 1 + self.every
        self.last_gap = self.every
        # Below this count a step takes the fast path (see attach): nothing to do.
        self.quiet_until = 0
        # Time spent in the per-step callback since the last sample (its own bookkeeping,
        # and stopping the detector): also paid for out of the budget.
        self.overhead_s = 0.0

    def closed(self, index: int, t: float, watched: bool) -> bool:
        """Step ``index`` ended at ``t``; is the next step watched? Counted from the first
        step this sampler saw, so a detector attached late still starts with its samples."""
        n = self.n
        self.n = n + 1
        dur = t - self.prev_t if self.prev_t is not None else None
        self.prev_t = t
        if dur is not None and n > 0:
            if watched:
                if n > self.early:  # the early samples run while torch warms up
                    self.last_gap = self.gap(dur)
                    self.next_at = n + 1 + self.last_gap
            else:
                b = self.base
                self.base = dur if b is None else b + 0.1 * (dur - b)
        nxt = n + 1
        self.quiet_until = 0 if (self.all or nxt <= self.early) else self.next_at - WARM
        return self.all or nxt <= self.early or nxt >= self.next_at

    def gap(self, watched_dur: float) -> int:
        base = self.base
        if base is None:
            return self.every
        extra = max(0.0, watched_dur - base) + self.overhead_s
        self.overhead_s = 0.0
        allowed = max(self.budget_s, FRACTION * base)
        return max(self.every, min(1_000_000, math.ceil(extra / allowed - 1e-9)))


class Collector:
    """Counts per site within a step; the training thread only touches dicts."""

    def __init__(self, put: Callable[[Any], None], pid: Callable[[], int]) -> None:
        self.put = put
        self.pid = pid
        self.counts: dict[SiteKey, int] = {}
        self.fast: dict[tuple[Any, int], SiteKey] = {}  # (code, lasti) of a user frame

    def sync_at(self, frame: FrameType | None) -> None:
        """A real sync reported while ``frame`` ran: count it at the first user frame."""
        if frame is None:
            return
        key = (frame.f_code, frame.f_lasti)
        site = self.fast.get(key)
        if site is None:
            user = first_user_frame(frame)
            if user is None:
                return
            c = user.f_code
            site = (op_at(user), c.co_filename, user.f_lineno, c.co_name, "sync")
            if user is frame:
                if len(self.fast) > 10000:
                    self.fast.clear()
                self.fast[key] = site
        self.counts[site] = self.counts.get(site, 0) + 1

    def add(self, site: SiteKey) -> None:
        self.counts[site] = self.counts.get(site, 0) + 1

    def flush(self, step: int, sampled: bool) -> None:
        counts = self.counts
        if not counts and not sampled:
            return
        self.counts = {}
        sites = tuple((*k, n, None) for k, n in counts.items())
        self.put(SyncBatch(self.pid(), step, sampled, sites))


def attach(state: Any, torch: Any) -> Collector | None:
    """Start sync detection as configured; None when ``PERFTOP_SYNC=off``."""
    mode = os.environ.get("PERFTOP_SYNC", "sampled").strip().lower()
    if mode in ("off", "0", "no", "false"):
        return None
    from perftop.hook import frames, sync_cuda, sync_detect

    frames.configure()
    collector = Collector(state.sender.put, lambda: state.sender.pid)
    sampler = Sampler(
        env_int("PERFTOP_SYNC_EARLY", 3, minimum=0) or 0,
        env_int("PERFTOP_SYNC_EVERY", 200, minimum=0) or 0,
        (env_int("PERFTOP_SYNC_BUDGET_US", 1, minimum=0) or 0) * 1e-6,
    )
    sampler.all = mode == "all"
    detector = sync_detect.make_detector(torch, collector, state)
    warn = sync_cuda.attach(torch, collector, state)
    info = SyncInfo(
        time.time(),
        state.sender.pid,
        warn is not None,
        detector is not None,
        sampler.early,
        sampler.every,
    )
    told = [False]  # sent at the first step: a process that never trains stays silent
    tracker = state.tracker

    perf = time.perf_counter
    last = [-1]  # the last step index seen: steps skipped in between still count

    def on_step(index: int, t: float) -> int:
        """Returns the next step index that needs this callback."""
        t_in = perf()
        try:
            return _on_step(index, t)
        finally:
            sampler.overhead_s += perf() - t_in

    def _on_step(index: int, t: float) -> int:
        try:
            if last[0] >= 0 and index > last[0] + 1:
                sampler.n += index - last[0] - 1
                sampler.prev_t = None  # no duration to learn from across skipped steps
            last[0] = index
            if not told[0]:
                told[0] = True
                state.sender.put(replace(info, pid=state.sender.pid))
            watched = detector is not None and detector.active
            if watched:
                detector.stop()
            collector.flush(index, watched)
            if warn is not None:
                warn.keep_first()
                return index + 1  # real syncs are counted every step
            if detector is not None and sampler.closed(index, t, watched):
                detector.start()
                return index + 1
            # Nothing to do until the sampler's quiet stretch ends.
            return index + max(1, sampler.quiet_until - sampler.n + 1)
        except Exception:
            state.internal_error("sync step")
            return index + 1

    tracker.on_step = on_step

    def undo() -> None:
        tracker.on_step = None
        if detector is not None:
            detector.forget()

    state.undo.append(undo)
    if detector is not None:
        os.register_at_fork(after_in_child=detector.forget)
    return collector
