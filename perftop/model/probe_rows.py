"""The probes' rows: each process, the machine and its GPUs as last sampled, and the nodes
a collector hears.

Frozen rows of plain values like the rest of a :class:`~perftop.model.snapshot.Snapshot`,
kept apart because they are filled by the probes (psutil, /proc, NVML) and a collector,
not by the job's own events.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProcRow:
    """One process of the job as the probe last saw it, with whole-run aggregates.

    ``None`` means not available (no permission, not supported); the TUI shows "N/A".
    Rates are per second over the last interval. Join with ``Snapshot.roles`` by pid.
    """

    pid: int
    ppid: int | None = None
    name: str = ""
    cmdline: str = ""
    state: str = ""
    alive: bool = True
    cpu_percent: float | None = None
    cpu_cores: tuple[int, ...] = ()
    threads: int | None = None
    rss_bytes: int | None = None
    uss_bytes: int | None = None
    pss_bytes: int | None = None
    swap_bytes: int | None = None
    io_read_bps: float | None = None
    io_write_bps: float | None = None
    io_since_t: float | None = None  # when the interval of io_read_bps / io_write_bps began
    io_read_bytes: int | None = None  # since the process was first seen
    # (t, io_read_bytes then) at its samples, thinned to at most IO_MARKS, in whole-run
    # snapshots only (window=None): its reads over any later part of the run, after it exited
    io_read_marks: tuple[tuple[float, int], ...] = ()
    io_write_bytes: int | None = None
    cpu_percent_avg: float | None = None
    cpu_samples: int = 0  # the samples cpu_percent_avg is of (HostRow's: the run's)
    cpu_percent_max: float | None = None
    rss_bytes_max: int | None = None
    uss_bytes_max: int | None = None
    pss_bytes_max: int | None = None
    uss_bytes_first: int | None = None
    uss_bytes_last: int | None = None
    host: str = ""  # set where a collector merges nodes
    cpu_seconds: float | None = None  # user + system CPU time since the process started
    # bytes/s by which private memory (USS) grows, where it grows steadily (a straight line
    # fits its last ~15 s of samples); None when flat, jumpy or too few samples
    uss_growth_bps: float | None = None
    first_t: float | None = None  # when the probes first and last saw it (wall time)
    last_t: float | None = None
    # the share of wall time its main thread (its training thread, where the hook saw it
    # train on another) waited for a core (run-queue delay), over the last ~10 s and over
    # all the time it was seen (trends.py); None where not kept
    core_wait_share: float | None = None
    core_wait_share_avg: float | None = None
    cpus: str | None = None  # the CPUs it may run on ("0-3,8": its affinity); None: not said
    cpu_quota: float | None = None  # cores its cgroup's CPU limit allows; None: no limit
    ended_t: float | None = None  # when it ended, seen as it ended (probes/exits.py)
    # how: waitpid's status (exit code << 8, or the signal), read from its zombie; None:
    # alive, its end not seen (no pidfd here), or reaped by its parent before it was read
    exit_status: int | None = None
    oom_kills: int | None = None  # OOM kills counted as it ended (ProcExit.oom_kills)
    oom_source: str = ""  # ... by its memory cgroup's file, or "" the host's (/proc/vmstat)
    host_oom_kills: int | None = None  # the host's, where that is its cgroup's
    root: bool = False  # its node's job's own first process (ProcSample.root_pid)

    @property
    def oom_counted_by(self) -> str | None:
        """Where the OOM kills as it ended were counted: its memory cgroup's file
        (``oom_source``), else the host's ``/proc/vmstat``; None where none was read."""
        if self.oom_source:
            return self.oom_source
        return "/proc/vmstat" if self.oom_kills is not None else None

    @property
    def exit_code(self) -> int | None:
        s = self.exit_status
        return None if s is None or s & 0x7F else (s >> 8) & 0xFF

    @property
    def exit_signal(self) -> int | None:
        s = self.exit_status
        return None if s is None or not s & 0x7F else s & 0x7F


@dataclass(frozen=True, slots=True)
class HostRow:
    """The machine: latest sample plus whole-run aggregates."""

    t: float | None = None
    cpu_count: int = 0
    cpu_percent: float | None = None
    per_core: tuple[float, ...] = ()
    iowait_percent: float | None = None
    load: tuple[float, float, float] | None = None
    mem_total_bytes: int | None = None
    mem_used_bytes: int | None = None
    mem_available_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    disk_read_bps: float | None = None
    disk_write_bps: float | None = None
    disk_busy_percent: float | None = None
    net_rx_bps: float | None = None
    net_tx_bps: float | None = None
    shm_used_bytes: int | None = None  # /dev/shm: DataLoader batches cross processes there
    cpu_percent_avg: float | None = None
    cpu_samples: int = 0
    per_core_avg: tuple[float, ...] = ()
    iowait_percent_avg: float | None = None
    memory_used_bytes_max: int | None = None
    mem_available_bytes_min: int | None = None  # the least memory available over the run
    swap_used_bytes_max: int | None = None
    disk_read_bytes: int | None = None  # over the run
    disk_write_bytes: int | None = None
    disk_busy_percent_avg: float | None = None  # the busiest disk's, averaged over the run
    disk_read_bps_avg: float | None = None  # disk_read_bytes over the seconds they span
    disk_write_bps_avg: float | None = None
    probe_late_s: float | None = None  # how late the last probe tick ran


@dataclass(frozen=True, slots=True)
class GpuProcRow:
    pid: int
    mem_bytes: int | None = None
    sm_percent: float | None = None


@dataclass(frozen=True, slots=True)
class GpuRow:
    """One GPU through NVML. Each figure is ``None`` when NVML could not give it."""

    index: int
    name: str = ""
    uuid: str = ""
    util_percent: float | None = None  # NVML "utilization": time a kernel ran, not SM use
    sm_activity_percent: float | None = None  # where the device reports it
    mem_util_percent: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    pcie_rx_bps: float | None = None
    pcie_tx_bps: float | None = None
    throttle: tuple[str, ...] = ()
    processes: tuple[GpuProcRow, ...] = ()
    util_percent_avg: float | None = None
    util_percent_max: float | None = None
    mem_used_bytes_max: int | None = None
    power_w_avg: float | None = None
    temperature_c_max: float | None = None
    # (figure, run average, run maximum) for every sampled figure, for reports
    stats: tuple[tuple[str, float | None, float | None], ...] = ()
    host: str = ""  # set where a collector merges nodes
    # every pid it listed over the run (at most PIDS_SEEN), in whole-run snapshots only
    # (window=None): which devices a finished job used, its processes gone from them
    pids_seen: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeRow:
    """A node forwarding to a collector: its name (host, made unique), whether its link is
    up, its job's state and the events it sent."""

    name: str
    connected: bool = True
    state: str = ""
    events: int = 0
    dropped_events: int = 0
