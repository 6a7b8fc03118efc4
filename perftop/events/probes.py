"""Probe events: what the monitor samples about the job's processes, the host and its GPUs.

Standard library only. One event per probe per tick carries every process (or GPU) as a
tuple of rows, so a 17-process job costs one event a second, not seventeen. Row layouts are
fixed by the ``*_FIELDS`` tuples below and, like event fields, only ever grow at the end.
Byte counters are deltas over the tick's ``dt`` seconds so a recording started mid-run (or
a replay) needs no earlier state; the model turns them into rates and run totals.
"""

from __future__ import annotations

import math
from typing import Any

from perftop.events.base import Event, event

# One row of ProcSample.rows. cpu_percent is psutil's scale: 100 = one core fully busy.
PROC_FIELDS = (
    "pid",
    "ppid",
    "name",
    "state",
    "cpu_percent",
    "cpu_core",  # the core it last ran on
    "threads",
    "rss",
    "uss",  # Private_Clean + Private_Dirty (+ Hugetlb) of smaps_rollup
    "pss",
    "swap",
    "io_read",  # bytes read from storage during dt (None: not permitted)
    "io_write",
    "cpu_s",  # user + system CPU seconds since the process started (a counter's source)
    # seconds its main thread (or wait_tid) has waited for a core since it started
    # (run-queue delay, /proc/PID/schedstat); None where the kernel keeps none
    "cpu_wait_s",
    "cpus",  # the CPUs it may run on (its affinity: "0-3,8"); None where the OS will not say
    "cpu_quota",  # cores its cgroup's CPU limit allows (1.5); None: no limit, or unread
    # the thread cpu_wait_s is of where not the main thread: its training thread (the
    # hook's TrainThread); another counter than the main thread's, from its own start
    "wait_tid",
)

# One row of GpuSample.devices.
GPU_FIELDS = (
    "index",
    "name",
    "uuid",
    "util_percent",  # NVML utilization.gpu: share of time a kernel ran, not SM occupancy
    "sm_activity_percent",  # sum of per-process SM utilization, where the device reports it
    "mem_util_percent",
    "mem_used",
    "mem_total",
    "power_w",
    "power_limit_w",
    "temperature_c",
    "sm_clock_mhz",
    "pcie_rx_bps",
    "pcie_tx_bps",
    "throttle",  # tuple of reason names
    "processes",  # tuple of (pid, mem_bytes, sm_percent)
)


@event("procs")
class ProcSample(Event):
    """Every live process of the job at one probe tick (rows as in ``PROC_FIELDS``)."""

    t: float
    dt: float  # seconds since the previous tick (0.0 on the first)
    root_pid: int
    rows: tuple[tuple[Any, ...], ...] = ()


@event("proc_info")
class ProcInfo(Event):
    """A process seen for the first time (re-sent now and then): its command line."""

    t: float
    pid: int
    create_time: float
    cmdline: str


@event("proc_exit")
class ProcExit(Event):
    """A process of the job ended, seen as it ended (its pidfd): ``t`` when, ``status`` as
    ``waitpid`` encodes it (an exit code, or the signal that killed it), read from the
    zombie before its parent reaps it; None where the parent reaped it first."""

    t: float
    pid: int
    status: int | None = None
    # OOM kills counted from a probe tick at least 5 s before to this end, less those an
    # earlier end claimed (its memory cgroup's where known, else the host's: ``oom_source``):
    # 1 or more where the OOM killer took it (SIGKILL), 0 where it did not; None: unread
    oom_kills: int | None = None
    # where they were counted: its memory cgroup's file (``memory.events``,
    # ``memory.oom_control``: its own processes' kills), or "" the host's (/proc/vmstat)
    oom_source: str = ""
    host_oom_kills: int | None = None  # the host's, where ``oom_source`` is its cgroup's


@event("host")
class HostSample(Event):
    """The machine at one probe tick; byte counters are deltas over ``dt``."""

    t: float
    dt: float
    cpu_count: int
    cpu_percent: float | None
    per_core: tuple[float, ...]
    iowait_percent: float | None
    load: tuple[float, ...] | None
    mem_total: int | None
    mem_used: int | None
    mem_available: int | None
    swap_total: int | None
    swap_used: int | None
    disk_read: int | None
    disk_write: int | None
    disk_busy_percent: float | None
    net_rx: int | None
    net_tx: int | None
    shm_used: int | None = None


@event("gpus")
class GpuSample(Event):
    """Every GPU at one probe tick (rows as in ``GPU_FIELDS``); ``note`` says why there are
    none ("NVML library not found") or what could not be read."""

    t: float
    devices: tuple[tuple[Any, ...], ...] = ()
    note: str = ""


@event("probe")
class ProbeTick(Event):
    """The sampler's own health: how late this tick started and the CPU time it took."""

    t: float
    interval_s: float
    late_s: float
    cpu_s: float
    missed: int = 0  # ticks skipped because an earlier one overran


@event("probe_failed")
class ProbeFailed(Event):
    """A probe (``procs``, ``host``, ``gpu``) raised and gave no sample this tick; sent when
    it starts failing, so its panel can say it stopped and why. Its next sample clears it."""

    t: float
    probe: str
    reason: str


def _int(v: Any) -> Any:
    return v if type(v) is int else None


def _num(v: Any) -> Any:
    return v if type(v) is int or (type(v) is float and math.isfinite(v)) else None


def _str(v: Any) -> Any:
    return v if type(v) is str else None


def _names(v: Any) -> Any:
    return tuple(x for x in v if type(x) is str) if isinstance(v, (tuple, list)) else None


def _gpu_procs(v: Any) -> Any:
    """(pid, mem_bytes, sm_percent) rows whose pid is a number; the others' N/A."""
    if not isinstance(v, (tuple, list)):
        return None
    out = []
    for p in v:
        if isinstance(p, (tuple, list)) and len(p) >= 3 and type(p[0]) is int:
            out.append((p[0], _int(p[1]), _num(p[2])))
    return tuple(out)


# What each field of a row must be; a value that is not (a row is a tuple of JSON values
# in an event's types: a node's or a damaged writer's may hold anything) reads as N/A.
_PROC = tuple(zip(PROC_FIELDS, (_int, _int, _str, _str, _num, _int, _int, _int, _int, _int,
                                 _int, _int, _int, _num, _num, _str, _num, _int),
                  strict=True))  # fmt: skip
_GPU = tuple(zip(GPU_FIELDS, (_int, _str, _str, _num, _num, _num, _int, _int, _num, _num, _num,
                              _num, _num, _num, _names, _gpu_procs), strict=True))  # fmt: skip


def _row(row: Any, fields: tuple[tuple[str, Any], ...]) -> dict[str, Any] | None:
    if not isinstance(row, (tuple, list)) or not row or type(row[0]) is not int:
        return None  # no key (a pid, a device's index): no row
    n = len(row)
    return {k: (kind(row[i]) if i < n else None) for i, (k, kind) in enumerate(fields)}


def proc_row(row: Any) -> dict[str, Any] | None:
    """A row as a dict (missing trailing fields from an older writer become None, and so
    does a value not of its field's kind); None for a row without a pid."""
    return _row(row, _PROC)


def gpu_row(row: Any) -> dict[str, Any] | None:
    """As :func:`proc_row`, for a GPU's row (None without an index)."""
    return _row(row, _GPU)
