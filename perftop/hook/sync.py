"""Sync sites per step: one collector fed by the CUDA sync debug mode (every step, kind
``sync``) and by the sampled dispatch-level detector (kind ``potential``; on CUDA too,
where it also times the wait inside each syncing call). The detector steps aside for good
once torch.compile is in use (see :func:`compile_guard`).

Settings, read from the environment when torch is imported:

- ``PERFTOP_SYNC``: ``sampled`` (default), ``all`` (detector on every step: slow, for
  debugging) or ``off`` (no detection at all, CUDA debug mode included).
- ``PERFTOP_SYNC_EARLY``: early steps the detector watches (default 3: steps 1-3).
- ``PERFTOP_SYNC_EVERY``: fewest steps between later samples (default 200).
- ``PERFTOP_SYNC_BUDGET_US``: amortized extra µs per step the detector may cost
  (default 1); the gap between samples grows with the measured cost of a sampled step.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from types import FrameType
from typing import Any

from perftop.events import SyncBatch, SyncInfo
from perftop.hook.frames import Where, first_outside, op_at, where
from perftop.hook.state import env_int

# op, kind, then where: (file, line, function, lib_file, lib_line, lib_function, package)
SiteKey = tuple[str, str, Where]
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
    """Counts (and, on an accelerator, host time blocked) per site within a step; the
    training thread only touches dicts."""

    def __init__(self, put: Callable[[Any], None], pid: Callable[[], int]) -> None:
        self.put = put
        self.pid = pid
        self.counts: dict[SiteKey, int] = {}
        self.blocked: dict[SiteKey, float] = {}
        self.fast: dict[tuple[Any, int], SiteKey] = {}  # (code, lasti) of a user frame

    def sync_at(self, frame: FrameType | None) -> None:
        """A real sync reported while ``frame`` ran: count it at the first user frame, with
        the library frame that made the call as detail."""
        if frame is None:
            return
        key = (frame.f_code, frame.f_lasti)
        site = self.fast.get(key)
        if site is None:
            outside = first_outside(frame)
            if outside is None:
                return
            w = where(outside)
            site = (op_at(outside), "sync", w)
            if outside is frame and w[6] is None:  # the user's own frame: same site always
                if len(self.fast) > 10000:
                    self.fast.clear()
                self.fast[key] = site
        self.counts[site] = self.counts.get(site, 0) + 1

    def add(self, site: SiteKey, blocked_s: float | None = None) -> None:
        self.counts[site] = self.counts.get(site, 0) + 1
        if blocked_s is not None:
            self.blocked[site] = self.blocked.get(site, 0.0) + blocked_s

    def flush(self, step: int, sampled: bool) -> None:
        counts = self.counts
        if not counts and not sampled:
            return
        self.counts = {}
        blocked, self.blocked = self.blocked, {}
        sites = []
        for key, n in counts.items():
            op, kind, w = key
            site = (op, w[0], w[1], w[2], kind, n, blocked.get(key))
            sites.append(site if w[6] is None else (*site, *w[3:]))  # library detail
        self.put(SyncBatch(self.pid(), step, sampled, tuple(sites)))


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
    aside = compile_guard(state, torch, detector, warn is not None)

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
            if detector is not None and sampler.closed(index, t, watched) and not aside():
                detector.start()
                return index + 1
            if warn is not None:
                return index + 1  # real syncs are counted every step
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


def compile_guard(state: Any, torch: Any, detector: Any, cuda_debug: bool) -> Callable[[], bool]:
    """The detector steps aside for good once torch.compile is in use: dynamo guards on
    the function-mode stack, so a mode pushed on some steps only would make it recompile,
    and a mode on the stack while it traces would be traced. Noticed when ``torch.compile``
    is called (wrapped; nothing else about the call changes), or else from dynamo's own
    counters before each sample. Returns the check made before each sample."""
    aside = [detector is None]

    def step_aside(why: str) -> None:
        if aside[0]:
            return
        aside[0] = True
        detector.stop()  # only from the top of the stack; else at the next step end
        rest = " (real syncs are still counted by CUDA's sync debug mode)" if cuda_debug else ""
        state.sender.note(
            "info",
            f"sync detection paused: {why}; its TorchFunctionMode would make dynamo "
            f"recompile, so potential sync sites are no longer sampled{rest}",
        )

    def check() -> bool:
        if not aside[0]:
            utils = sys.modules.get("torch._dynamo.utils")
            frames = getattr(utils, "counters", {}).get("frames") if utils else None
            if frames and frames.get("total"):
                step_aside("torch.compile (dynamo) is in use")
        return aside[0]

    orig = getattr(torch, "compile", None)
    if orig is not None and detector is not None:

        @functools.wraps(orig)
        def compile(*args: Any, **kwargs: Any) -> Any:
            try:
                step_aside("torch.compile is in use")
            except Exception:
                state.internal_error("sync detection (torch.compile)")
            return orig(*args, **kwargs)

        torch.compile = compile
        state.undo.append(lambda: setattr(torch, "compile", orig))
    return check
