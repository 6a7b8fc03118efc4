"""DataLoader workers as they measure themselves (``WorkerStats``): how long a batch takes
them, how busy they are, how much of a batch's time is CPU, how big the batches are.

Each report carries running totals, so rates come from the difference between the latest
report and the oldest one within ``RATE_WINDOW_S`` (event time): a dropped report only
coarsens them, and a replay gives what the live run gave.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from perftop.events import WorkerStats

RATE_WINDOW_S = 10.0
GONE_SHOWN_S = 5.0  # live snapshots keep an exited worker this long
MAX_WORKERS = 1024


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """One DataLoader worker process. Recent figures cover up to the last 10 s of its
    reports; ``None`` where it has not produced a batch yet."""

    pid: int
    ppid: int
    worker_id: int
    num_workers: int
    start_t: float
    last_t: float
    exited: bool
    batches: int
    busy_s: float
    cpu_s: float
    batch_s: float | None = None  # worker time per batch (recent)
    busy_share: float | None = None  # share of wall time spent making batches (recent)
    cpu_share: float | None = None  # share of batch time on the CPU (rest: waiting)
    batches_per_s: float | None = None  # what it produced (recent)
    batch_bytes: int | None = None  # tensor bytes per batch (average)
    torch_threads: int | None = None
    ready_t: float | None = None  # its first report of a batch made: its start-up is over


class _Worker:
    __slots__ = ("last", "history", "ready_t")

    def __init__(self, ev: WorkerStats) -> None:
        self.last = ev
        self.history: deque[WorkerStats] = deque()
        self.ready_t: float | None = None

    def add(self, ev: WorkerStats) -> None:
        if ev.batches < self.last.batches:  # out of order (a late flush): keep the newest
            return
        if ev.batches and self.ready_t is None:
            self.ready_t = ev.t
        self.last = ev
        self.history.append(ev)
        while len(self.history) > 2 and self.history[0].t < ev.t - RATE_WINDOW_S:
            self.history.popleft()

    def row(self) -> WorkerRow:
        ev = self.last
        first = self.history[0] if len(self.history) > 1 else None
        if first is not None and ev.t > first.t and ev.batches > first.batches:
            dt, db = ev.t - first.t, ev.batches - first.batches
            dbusy, dcpu = ev.busy_s - first.busy_s, ev.cpu_s - first.cpu_s
        else:  # one report: since the worker started
            dt, db, dbusy, dcpu = ev.t - ev.start_t, ev.batches, ev.busy_s, ev.cpu_s
        ok = db > 0 and dt > 0
        return WorkerRow(
            pid=ev.pid,
            ppid=ev.ppid,
            worker_id=ev.worker_id,
            num_workers=ev.num_workers,
            start_t=ev.start_t,
            last_t=ev.t,
            exited=ev.final,
            batches=ev.batches,
            busy_s=ev.busy_s,
            cpu_s=ev.cpu_s,
            batch_s=dbusy / db if ok else None,
            busy_share=min(1.0, dbusy / dt) if ok else None,
            cpu_share=min(1.0, dcpu / dbusy) if ok and dbusy > 0 else None,
            batches_per_s=db / dt if ok else None,
            batch_bytes=(
                ev.batch_bytes // ev.batches if ev.batch_bytes is not None and ev.batches else None
            ),
            torch_threads=ev.torch_threads,
            ready_t=self.ready_t,
        )


class WorkersReducer:
    handles = (WorkerStats,)

    def __init__(self) -> None:
        self.workers: dict[int, _Worker] = {}
        self.last_t: float | None = None

    def apply(self, ev: Any) -> None:
        w = self.workers.get(ev.pid)
        if w is None:
            if len(self.workers) >= MAX_WORKERS:  # many short epochs: forget the oldest
                del self.workers[next(iter(self.workers))]
            w = self.workers[ev.pid] = _Worker(ev)
        w.add(ev)
        if self.last_t is None or ev.t > self.last_t:
            self.last_t = ev.t

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        rows = [w.row() for w in self.workers.values()]
        if window is not None and self.last_t is not None:
            cutoff = self.last_t - GONE_SHOWN_S
            gone = {r.pid for r in rows if r.exited and r.last_t < cutoff}
            parts.setdefault("gone", set()).update(gone)
            rows = [r for r in rows if r.pid not in gone]
        rows.sort(key=lambda r: (r.ppid, r.start_t, r.worker_id))
        parts["workers"] = tuple(rows)
