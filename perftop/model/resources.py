"""Reducers for the probes' samples: the job's processes and the host (the GPUs:
:mod:`perftop.model.gpu_reducer`), each as
the latest figures plus whole-run aggregates (average, maximum, first/last, byte totals).

Byte counters arrive as deltas over each tick's ``dt``: rates are delta/dt, run totals the
sum of deltas, so a replay gives the same figures as the live run.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from perftop.events import HostSample, ProbeTick, ProcExit, ProcInfo, ProcSample
from perftop.events.probes import proc_row
from perftop.model.snapshot import HostRow, ProcRow
from perftop.model.trends import GROWTH_SPAN_S, CoreWait, steady_growth

GONE_SHOWN_S = 5.0  # live snapshots keep an exited process this long, marked not alive
IO_MARKS = 128  # a process's read totals kept over the run (ProcRow.io_read_marks)


@dataclass(slots=True)
class Agg:
    """Running average, maximum and minimum of one figure."""

    total: float = 0.0
    n: int = 0
    max: float | None = None
    min: float | None = None

    def add(self, x: float | None) -> None:
        if x is None:
            return
        self.total += x
        self.n += 1
        if self.max is None or x > self.max:
            self.max = x
        if self.min is None or x < self.min:
            self.min = x

    @property
    def avg(self) -> float | None:
        return round(self.total / self.n, 2) if self.n else None


def _rate(delta: int | None, dt: float) -> float | None:
    return None if delta is None or dt <= 0 else round(delta / dt, 1)


def _add(total: int | None, delta: int | None) -> int | None:
    if delta is None:
        return total
    return delta if total is None else total + delta


def whole_bytes(x: Any) -> int | None:
    """A byte count an Agg kept (as a float: its maximum, its minimum) in whole bytes."""
    return None if x is None else int(x)


# processes whose end was abnormal or unread kept past the live window (Snapshot.ended)
ENDS_KEPT = 128


def _exited(row: ProcRow, **end: Any) -> ProcRow:
    """``row`` of a process gone: no rates now; ``end``, how it ended where that was seen."""
    return replace(row, alive=False, state="exited", cpu_percent=None, io_read_bps=None,
                   io_write_bps=None, **end)  # fmt: skip


class _Proc:
    __slots__ = (
        "row", "first_t", "last_t", "cpu", "rss", "uss", "pss", "uss_first", "io_r", "io_w",
        "uss_recent", "wait", "io_marks",
    )  # fmt: skip

    def __init__(self, pid: int) -> None:
        self.row = ProcRow(pid)
        self.first_t: float | None = None
        self.last_t = 0.0
        self.cpu = Agg()
        self.rss, self.uss, self.pss = Agg(), Agg(), Agg()
        self.uss_first: int | None = None
        self.io_r: int | None = None
        self.io_w: int | None = None
        self.uss_recent: deque[tuple[float, int]] = deque()
        self.wait = CoreWait()
        self.io_marks: list[tuple[float, int]] = []  # (t, io_r then): ProcRow.io_read_marks


class ProcessesReducer:
    handles = (ProcSample, ProcInfo, ProcExit)

    def __init__(self) -> None:
        self.procs: dict[int, _Proc] = {}
        self.cmdlines: dict[int, str] = {}
        self.last_live_t: float | None = None  # the last tick that saw a process
        self.ends: dict[int, None] = {}  # pids whose end was abnormal or unread, in order

    def apply(self, ev: Any) -> None:
        if isinstance(ev, ProcInfo):
            self.cmdlines[ev.pid] = ev.cmdline
            p = self.procs.get(ev.pid)
            if p is not None:
                p.row = replace(p.row, cmdline=ev.cmdline)
            return
        if isinstance(ev, ProcExit):  # seen as it ended: how, where it was read
            p = self.procs.get(ev.pid)
            if p is not None:
                p.row = _exited(p.row, ended_t=ev.t, exit_status=ev.status,
                                oom_kills=ev.oom_kills, oom_source=ev.oom_source,
                                host_oom_kills=ev.host_oom_kills)  # fmt: skip
                if ev.status is None or ev.status:  # not a clean exit, or not known
                    self.ends[ev.pid] = None
                    while len(self.ends) > ENDS_KEPT:
                        del self.ends[next(iter(self.ends))]
            return
        if ev.rows:
            self.last_live_t = ev.t
        seen = set()
        for raw in ev.rows:
            r = proc_row(raw)
            if r is None:
                continue
            pid = r["pid"]
            seen.add(pid)
            p = self.procs.get(pid)
            if p is None:
                p = self.procs[pid] = _Proc(pid)
            p.last_t = ev.t
            if p.first_t is None:
                p.first_t = ev.t
            p.cpu.add(r["cpu_percent"])
            p.rss.add(r["rss"])
            p.uss.add(r["uss"])
            p.pss.add(r["pss"])
            if r["uss"] is not None:
                if p.uss_first is None:
                    p.uss_first = r["uss"]
                recent = p.uss_recent
                recent.append((ev.t, r["uss"]))
                while recent[0][0] < ev.t - GROWTH_SPAN_S:
                    recent.popleft()
            p.io_r, p.io_w = _add(p.io_r, r["io_read"]), _add(p.io_w, r["io_write"])
            if p.io_r is not None:
                if len(p.io_marks) >= IO_MARKS:  # every other one goes: a long run's marks
                    del p.io_marks[1::2]  # stay as many, further apart
                p.io_marks.append((ev.t, p.io_r))
            p.wait.add(ev.t, r["cpu_wait_s"], r["wait_tid"])
            p.row = ProcRow(
                pid=pid,
                ppid=r["ppid"],
                name=r["name"] or "",
                cmdline=self.cmdlines.get(pid, ""),
                state=r["state"] or "",
                alive=True,
                cpu_percent=r["cpu_percent"],
                cpu_cores=() if r["cpu_core"] is None else (r["cpu_core"],),
                threads=r["threads"],
                rss_bytes=r["rss"],
                uss_bytes=r["uss"],
                pss_bytes=r["pss"],
                swap_bytes=r["swap"],
                io_read_bps=_rate(r["io_read"], ev.dt),
                io_write_bps=_rate(r["io_write"], ev.dt),
                io_since_t=ev.t - ev.dt if ev.dt else None,
                io_read_bytes=p.io_r,
                io_write_bytes=p.io_w,
                cpu_percent_avg=p.cpu.avg,
                cpu_samples=p.cpu.n,
                cpu_percent_max=p.cpu.max,
                rss_bytes_max=whole_bytes(p.rss.max),
                uss_bytes_max=whole_bytes(p.uss.max),
                pss_bytes_max=whole_bytes(p.pss.max),
                uss_bytes_first=p.uss_first,
                uss_bytes_last=r["uss"] if r["uss"] is not None else p.row.uss_bytes_last,
                cpu_seconds=r["cpu_s"],
                uss_growth_bps=steady_growth(p.uss_recent),
                first_t=p.first_t,
                last_t=ev.t,
                core_wait_share=p.wait.share(),
                core_wait_share_avg=p.wait.share_avg(),
                cpus=r["cpus"],
                cpu_quota=r["cpu_quota"],
                root=pid == ev.root_pid,
            )
        for pid, p in self.procs.items():
            if pid not in seen and p.row.alive:
                p.row = _exited(p.row)

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        if window is None:  # the whole run's: with each process's reads over it
            rows = [replace(p.row, io_read_marks=tuple(p.io_marks)) for p in self.procs.values()]
        else:
            rows = [p.row for p in self.procs.values()]
        # Exited processes leave the live view after a while (workers of each epoch come
        # and go); once nothing runs any more, the last ones seen keep their figures.
        if window is not None and self.last_live_t is not None:
            cutoff = self.last_live_t - GONE_SHOWN_S
            gone = {r.pid for r in rows if not r.alive and self.procs[r.pid].last_t < cutoff}
            parts.setdefault("gone", set()).update(gone)  # their roles leave with them
            rows = [r for r in rows if r.pid not in gone]
        parts["processes"] = tuple(rows)
        parts["ended"] = tuple(self.procs[pid].row for pid in self.ends)


class HostReducer:
    handles = (HostSample, ProbeTick)

    def __init__(self) -> None:
        self.row = HostRow()
        self.cpu, self.iowait, self.mem = Agg(), Agg(), Agg()
        self.cores: list[float] = []  # each core's busy % summed over the samples ...
        self.cores_n = 0  # ... that had as many cores as the latest
        self.disk_r: int | None = None
        self.disk_w: int | None = None
        self.disk_busy = Agg()
        self.avail = Agg()  # memory available: its least over the run
        self.swap = Agg()
        self.disk_s = 0.0  # the seconds disk_r spans

    def apply(self, ev: Any) -> None:
        if isinstance(ev, ProbeTick):
            self.row = replace(self.row, probe_late_s=ev.late_s)
            return
        self.cpu.add(ev.cpu_percent)
        if len(ev.per_core) != len(self.cores):  # (a host's CPUs brought on or offline)
            self.cores, self.cores_n = [0.0] * len(ev.per_core), 0
        self.cores = [a + b for a, b in zip(self.cores, ev.per_core, strict=True)]
        self.cores_n += 1
        self.iowait.add(ev.iowait_percent)
        self.mem.add(ev.mem_used)
        self.disk_r, self.disk_w = _add(self.disk_r, ev.disk_read), _add(self.disk_w, ev.disk_write)
        self.disk_busy.add(ev.disk_busy_percent)
        self.swap.add(ev.swap_used)
        self.avail.add(ev.mem_available)
        if ev.disk_read is not None:
            self.disk_s += ev.dt
        load = tuple(ev.load) if ev.load is not None and len(ev.load) == 3 else None
        self.row = HostRow(
            t=ev.t,
            cpu_count=ev.cpu_count,
            cpu_percent=ev.cpu_percent,
            per_core=tuple(ev.per_core),
            iowait_percent=ev.iowait_percent,
            load=load,
            mem_total_bytes=ev.mem_total,
            mem_used_bytes=ev.mem_used,
            mem_available_bytes=ev.mem_available,
            swap_total_bytes=ev.swap_total,
            swap_used_bytes=ev.swap_used,
            disk_read_bps=_rate(ev.disk_read, ev.dt),
            disk_write_bps=_rate(ev.disk_write, ev.dt),
            disk_busy_percent=ev.disk_busy_percent,
            net_rx_bps=_rate(ev.net_rx, ev.dt),
            net_tx_bps=_rate(ev.net_tx, ev.dt),
            shm_used_bytes=ev.shm_used,
            cpu_percent_avg=self.cpu.avg,
            cpu_samples=self.cpu.n,
            per_core_avg=tuple(round(c / self.cores_n, 1) for c in self.cores),
            iowait_percent_avg=self.iowait.avg,
            memory_used_bytes_max=whole_bytes(self.mem.max),
            mem_available_bytes_min=whole_bytes(self.avail.min),
            swap_used_bytes_max=whole_bytes(self.swap.max),
            disk_read_bytes=self.disk_r,
            disk_write_bytes=self.disk_w,
            disk_busy_percent_avg=self.disk_busy.avg,
            disk_read_bps_avg=_rate(self.disk_r, self.disk_s),
            disk_write_bps_avg=_rate(self.disk_w, self.disk_s),
            probe_late_s=self.row.probe_late_s,
        )

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        parts["host"] = self.row
