"""A slice of a recording: the events of some steps or some seconds, for ``report``.

Times are seconds since the session start. Steps are counted per process from 1, as the
Steps panel counts them; a step range also bounds the probe samples, notes and output to
the time its steps took on the primary process, and the time outside steps (an evaluation,
a checkpoint) to the intervals that began in it. The session and job start events are kept
(moved to the slice's start, so the elapsed time is the slice's); the job's exit only when
it falls inside. What the session is (its processes, loaders, hooks) is kept where it is of
the slice: made before its end, and alive in it where made before it (a rank's hello
whenever it came), and why there is no GPU where the probe said so before it. A
collective is of the slice where it was entered in it, whenever its record was sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from perftop.errors import UsageError
from perftop.events import (
    Between,
    BetweenOpen,
    CollBatch,
    Event,
    GpuSample,
    Hello,
    JobStart,
    LoaderInfo,
    SessionStart,
    Step,
    StepGpu,
    SyncBatch,
    SyncInfo,
)
from perftop.events.comm import CollRecord
from perftop.events.probes import ProcInfo, ProcSample
from perftop.model.coll_record import read_record
from perftop.model.roles import ranked
from perftop.recording import ReadStats, read_events

TIMELESS = (Hello, LoaderInfo, ProcInfo, SyncInfo)  # what the session is, kept whole


@dataclass(frozen=True, slots=True)
class Slice:
    from_step: int | None = None
    to_step: int | None = None
    from_time: float | None = None
    to_time: float | None = None

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.from_step, self.to_step, self.from_time, self.to_time))

    def check(self) -> Slice:
        for n, opt in ((self.from_step, "--from-step"), (self.to_step, "--to-step")):
            if n is not None and n < 1:
                raise UsageError(f"{opt} {n}: steps count from 1 (the first step)")
        for lo, hi, what in (
            (self.from_step, self.to_step, "step"),
            (self.from_time, self.to_time, "time"),
        ):
            if lo is not None and lo < 0 or hi is not None and hi < 0:
                raise UsageError(f"--from-{what}/--to-{what} must not be negative")
            if lo is not None and hi is not None and hi < lo:
                raise UsageError(f"--to-{what} is before --from-{what}")
        return self


def _window(path: Path, sl: Slice) -> tuple[float, float, float]:
    """(session start, window start, window end) in the recording's clock. A step range's
    window is the time its steps took on the primary process, or, where that is a rank of
    a distributed job, on every rank (each rank's steps of the range are in it, though a
    rank ends a step a little after another)."""
    start: float | None = None
    lo, hi = float("-inf"), float("inf")
    counts: dict[int, int] = {}
    firsts: dict[int, float] = {}  # each process's from_step start, to_step end
    lasts: dict[int, float] = {}
    ranks: set[int] = set()
    primary: int | None = None
    by_step = sl.from_step is not None or sl.to_step is not None
    last_t = float("-inf")  # read to the end only to place a --from-time
    for ev in read_events(path, ReadStats()):
        if sl.from_time is not None:
            last_t = max(last_t, getattr(ev, "t", None) or getattr(ev, "t1", None) or last_t)
        if isinstance(ev, SessionStart) and start is None:
            start = ev.t
            if not by_step and sl.from_time is None:
                break
        elif isinstance(ev, Hello) and ranked(ev.rank, ev.world_size):
            ranks.add(ev.pid)
        elif isinstance(ev, Step) and by_step:
            primary = ev.pid if primary is None else primary
            n = counts[ev.pid] = counts.get(ev.pid, 0) + 1
            if sl.from_step is not None and n == sl.from_step:
                firsts[ev.pid] = ev.t0
            if sl.to_step is not None and n == sl.to_step:
                lasts[ev.pid] = ev.t1
                if ev.pid == primary and not ranks and sl.from_time is None:
                    break  # (a rank's group is read to the end: each rank's last step)
    if primary is not None:
        group = ranks if primary in ranks else {primary}
        lo = min((firsts[p] for p in group if p in firsts), default=lo)
        hi = max((lasts[p] for p in group if p in lasts), default=hi)
    if start is None:
        start = 0.0
    if sl.from_time is not None:
        lo = max(lo, start + sl.from_time)
    if sl.to_time is not None:
        hi = min(hi, start + sl.to_time)
    if sl.from_step is not None and lo == float("-inf"):
        raise UsageError(f"{path}: the recording has fewer than {sl.from_step} steps")
    if sl.from_time is not None and start + sl.from_time > last_t:
        raise UsageError(
            f"{path}: --from-time {sl.from_time:g} is past the end of the recording "
            f"(it ends {max(0.0, last_t - start):.1f} s after the session start)"
        )
    return start, lo, hi


def _alive_in(path: Path, lo: float, hi: float) -> set[int]:
    """The processes the probes saw inside the window, or that stepped in it."""
    alive: set[int] = set()
    for ev in read_events(path, ReadStats()):
        if isinstance(ev, ProcSample) and lo <= ev.t <= hi:
            alive.update(r[0] for r in ev.rows if r)
        elif isinstance(ev, Step) and ev.t0 <= hi and ev.t1 >= lo:
            alive.add(ev.pid)
    return alive


def _of_slice(ev: Event, lo: float, hi: float, alive: set[int]) -> bool:
    """Whether a timeless event (what a process or a loader is) is of the slice: none made
    after its end (the next epoch's workers, a later evaluation's loader), nor a process
    gone before it, nor a loader whose workers all were (an earlier evaluation's)."""
    if isinstance(ev, Hello) and ev.pid in alive:
        return True  # what a process of the slice is, whenever it said so (a rank greets
        # once its group is made, after its first steps)
    t = getattr(ev, "t", lo)
    if t > hi:
        return False
    if t >= lo:
        return True
    if isinstance(ev, ProcInfo):
        return ev.pid in alive
    if isinstance(ev, LoaderInfo) and ev.workers:
        return any(pid in alive for _w, pid in ev.workers)
    return True


def _entered_in(rec: CollRecord, lo: float, hi: float) -> bool:
    """Whether a collective's record was entered inside the window."""
    c = read_record(rec)
    return c is not None and lo <= c.t <= hi


def sliced_events(path: str | Path, sl: Slice, stats: ReadStats) -> Iterator[Event]:
    """The events of ``path`` inside the slice (see the module docstring)."""
    path = Path(path)
    _, lo, hi = _window(path, sl)
    alive = _alive_in(path, lo, hi)
    counts: dict[int, int] = {}
    kept: dict[int, tuple[int, int]] = {}  # pid -> (first, last) step index kept
    for ev in read_events(path, stats):
        if isinstance(ev, (SessionStart, JobStart)):
            yield replace(ev, t=max(ev.t, lo)) if lo > ev.t else ev
        elif isinstance(ev, TIMELESS):
            if _of_slice(ev, lo, hi, alive):  # (a hello after the slice: at its end)
                yield replace(ev, t=hi) if getattr(ev, "t", lo) > hi else ev
        elif isinstance(ev, Step):
            n = counts[ev.pid] = counts.get(ev.pid, 0) + 1
            if sl.from_step is not None and n < sl.from_step:
                continue
            if sl.to_step is not None and n > sl.to_step:
                continue
            if ev.t0 >= lo and ev.t1 <= hi:
                first = kept.get(ev.pid, (ev.index, ev.index))[0]
                kept[ev.pid] = (first, ev.index)
                yield ev
        elif isinstance(ev, (SyncBatch, StepGpu)):
            idx = ev.step if isinstance(ev, SyncBatch) else ev.index
            rng = kept.get(ev.pid)
            if rng is not None and rng[0] <= idx <= rng[1]:
                yield ev
        elif isinstance(ev, (Between, BetweenOpen)):
            if lo <= ev.t0 < hi:  # begun inside: an evaluation after the last step is not
                yield ev
        elif isinstance(ev, GpuSample) and not ev.devices and ev.t < lo:
            yield replace(ev, t=lo)  # why there is no GPU (said once, at the start)
        elif isinstance(ev, CollBatch):  # the collectives entered in the slice, whenever sent
            inside = tuple(r for r in ev.records if _entered_in(r, lo, hi))
            if inside:
                yield replace(ev, records=inside)
        else:
            t = getattr(ev, "t", None)
            if t is None or lo <= t <= hi:
                yield ev
