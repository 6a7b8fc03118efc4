"""What the rules share: the recent figures of the training loop and its DataLoader
workers, read once from a snapshot, and the wording of numbers.

Rules are pure functions ``rule(snap, active) -> list[Hint]``: ``active`` holds the ids
shown now, so a rule can keep a shown hint on a looser threshold than the one that
raised it (hysteresis in the value; the engine adds it in time).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from perftop.fmt import fraction, nbytes, seconds
from perftop.model.snapshot import GpuRow, Hint, Loader, ProcRow, Snapshot, StepRow
from perftop.model.workers import WorkerRow

Rule = Callable[[Snapshot, frozenset[str]], list[Hint]]

MIN_STEPS = 10  # recent steps a step-based rule needs before it says anything

__all__ = [
    "Loop",
    "Rule",
    "fraction",
    "nbytes",
    "seconds",
    "loop",
    "threshold",
    "workers_core_wait",
]


def threshold(hint_id: str, active: frozenset[str], enter: float, stay: float) -> float:
    """The bar a figure must clear: ``enter`` to raise a hint, ``stay`` to keep it."""
    return stay if hint_id in active else enter


@dataclass(frozen=True, slots=True)
class Loop:
    """The primary training process's recent steps (the chart's rows, first step left
    out: it includes starting the workers) and what feeds it."""

    pid: int
    rows: tuple[StepRow, ...]
    step_s: float  # mean step time
    data_s: float  # mean time blocked waiting for the next batch
    loader: Loader | None
    workers: tuple[WorkerRow, ...]  # the loader's current workers that reported

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def data_share(self) -> float:
        return self.data_s / self.step_s if self.step_s > 0 else 0.0

    @property
    def compute_s(self) -> float:
        """Mean step time without the data wait: what a step would take if fed."""
        return max(0.0, self.step_s - self.data_s)

    @property
    def steps_per_s(self) -> float | None:
        return 1.0 / self.step_s if self.step_s > 0 else None

    @property
    def wanted_per_s(self) -> float | None:
        """Batches per second the loop would take if it never waited."""
        return 1.0 / self.compute_s if self.compute_s > 0 else None

    @property
    def made_per_s(self) -> float | None:
        """Batches per second the workers can make together when always busy."""
        per = [1.0 / w.batch_s for w in self.workers if w.batch_s]
        return sum(per) if per else None

    @property
    def batch_s(self) -> float | None:
        """Median worker time to make one batch."""
        vals = sorted(w.batch_s for w in self.workers if w.batch_s is not None)
        return vals[len(vals) // 2] if vals else None

    @property
    def workers_busy(self) -> float | None:
        vals = [w.busy_share for w in self.workers if w.busy_share is not None]
        return sum(vals) / len(vals) if vals else None

    @property
    def workers_cpu(self) -> float | None:
        """Share of the workers' batch time spent on the CPU (the rest is waiting)."""
        busy = sum(w.busy_s for w in self.workers)
        return sum(w.cpu_s for w in self.workers) / busy if busy > 0 else None

    def workers_needed(self) -> int | None:
        """Workers that would make batches as fast as the loop takes them."""
        want, b = self.wanted_per_s, self.batch_s
        if want is None or b is None:
            return None
        return max(1, math.ceil(want * b * 1.1))  # a tenth spare: batches vary


def workers_core_wait(snap: Snapshot, lp: Loop) -> float | None:
    """Share of the workers' batch time they spent waiting for a core, measured (their
    run-queue delay, read by the process probe), or None where no worker's is known. Off
    the CPU on a busy host is that wait, not a read or a sleep: more workers would not
    overlap it. (An exited worker's last figure still holds: the live hint after the job's
    end says what the verdict says.)"""
    waits = {p.pid: p.core_wait_share for p in snap.processes}
    shares = []
    for w in lp.workers:
        wait = waits.get(w.pid)
        if wait is not None and w.busy_share:
            shares.append(min(1.0, wait / w.busy_share))
    return sum(shares) / len(shares) if shares else None


# The last snapshot asked and its loop, replaced as one tuple (a thread that evaluates
# other snapshots meanwhile never pairs one with another's loop).
_last: tuple[Snapshot | None, Loop | None] = (None, None)


def loop(snap: Snapshot) -> Loop | None:
    """The primary process's loop, or None before it has ``MIN_STEPS`` recent steps.

    Five rules ask for it in each evaluation of the same snapshot: it is made once and
    kept until another snapshot is asked, which a snapshot's immutability makes safe (all
    rules on the demo's snapshot: 398 -> 125 µs in a hot loop; 0.59 -> 0.47 ms a second
    in the monitor, where the rules run cold)."""
    global _last
    last = _last
    if last[0] is snap:
        return last[1]
    lp = _loop(snap)
    _last = (snap, lp)
    return lp


def _loop(snap: Snapshot) -> Loop | None:
    s = snap.steps
    if s.pid is None:
        return None
    rows = tuple(r for r in s.recent if r.index > 0 and r.pid == s.pid)
    if len(rows) < MIN_STEPS:
        return None
    total = sum(r.duration for r in rows)
    data = sum(r.data for r in rows)
    loader = loop_loader(snap.loaders, s.pid)
    return Loop(s.pid, rows, total / len(rows), data / len(rows), loader, _workers(snap, loader))


def loop_loader(loaders: Sequence[Loader], pid: int) -> Loader | None:
    """The loader the training loop takes its batches from: of the process's loaders, the
    latest started of those iterated with grad on; an evaluation's runs with it off, and
    with persistent workers its loader stays the latest started for good. Of those, one
    whose first iterator started in an evaluation (``during``: a validation run with grad
    on, the model in eval mode) is not the loop's where another is. Where none says (a
    recording from before it was kept), the latest started."""
    mine = sorted((ld for ld in loaders if ld.pid == pid), key=lambda ld: ld.t)
    grad = [ld for ld in mine if ld.grad is not False]
    pick = [ld for ld in grad if not ld.during] or grad or mine
    return pick[-1] if pick else None


def _workers(snap: Snapshot, loader: Loader | None) -> tuple[WorkerRow, ...]:
    if loader is None or not loader.num_workers:
        return ()
    mine = [w for w in snap.workers if w.ppid == loader.pid]
    pids = {pid for _, pid in loader.workers}
    current = [w for w in mine if w.pid in pids]
    if not current:  # the latest epoch's workers have not reported yet
        live = [w for w in mine if not w.exited]
        current = live or mine[-loader.num_workers :]
    return tuple(current)


def worker_procs(snap: Snapshot) -> list[tuple[int, ProcRow]]:
    """(worker id, probe row) of every DataLoader worker the probe sees alive."""
    rows = {p.pid: p for p in snap.processes if p.alive}
    return [
        (r.worker_id if r.worker_id is not None else -1, rows[r.pid])
        for r in snap.roles
        if r.role == "worker" and r.pid in rows
    ]


def job_gpus(snap: Snapshot) -> tuple[GpuRow, ...]:
    """The GPUs this job runs on: NVML lists every device of the host, and another job's
    GPU (idle or busy) says nothing about this one. Over a whole run, those that listed
    one of its pids at any time (a finished job's are gone from every device by the end).
    Where no device lists one of the job's pids (no process figures, or a container's own
    pid numbers), every device."""
    pids = {p.pid for p in snap.processes} | {t.pid for t in snap.trainers}
    mine = tuple(
        g
        for g in snap.gpus
        if any(p.pid in pids for p in g.processes) or not pids.isdisjoint(g.pids_seen)
    )
    return mine or snap.gpus


def plural(items: Iterable[str]) -> str:
    xs = list(items)
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def rate(x: float | None) -> str:
    return "N/A" if x is None else f"{x:.1f}" if x < 100 else f"{x:.0f}"
