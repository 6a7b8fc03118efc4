"""Immutable snapshots of a session: what the TUI renders, hints read and reports print.

Every part is a frozen dataclass of plain values, so a snapshot can cross threads and be
kept for comparison without copying. Parts owned by other modules (probes, sync) default to
empty so a snapshot is always complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from perftop.model.capture import Capture
from perftop.model.comm_rows import CommStats
from perftop.model.workers import WorkerRow

Role = Literal["main", "rank", "worker", "other"]  # what a process is to the job
Severity = Literal["high", "medium", "info"]  # a hint's weight, most at stake first
SyncKind = Literal["sync", "potential"]  # seen by CUDA's debug mode, or by the detector

PHASES = ("data", "forward/other", "backward", "optimizer")


@dataclass(frozen=True, slots=True)
class Meta:
    command: tuple[str, ...] = ()
    cwd: str = ""
    host: str = ""
    start_t: float | None = None
    now_t: float | None = None
    job_pid: int | None = None
    exit_code: int | None = None
    exit_t: float | None = None
    ended: bool = False  # the job is over, even when its exit code is not known
    record_path: str = ""
    dropped_events: int = 0
    rejected_frames: int = 0
    monitor_cpu_percent: float | None = None
    monitor_rss_bytes: int | None = None
    perftop_version: str = ""
    monitor_dropped: int = 0  # events the monitor's own bounded ingest queue dropped
    observer: bool = False  # watching a process without a hook (``perftop attach PID``)
    observer_python: str = ""

    @property
    def state(self) -> str:
        if self.exit_code is not None:
            return f"exited ({self.exit_code})"
        if self.ended:
            return "ended (exit code unknown)"
        return "running" if self.job_pid is not None else "starting"

    @property
    def elapsed_s(self) -> float | None:
        if self.start_t is None or self.now_t is None:
            return None
        end = self.exit_t if self.exit_t is not None else self.now_t
        return max(0.0, end - self.start_t)


@dataclass(frozen=True, slots=True)
class StepRow:
    """One step, split into phases (seconds); ``gpu`` once CUDA events resolved it."""

    pid: int
    index: int
    t0: float
    t1: float
    data: float
    backward: float
    optimizer: float
    other: float
    gpu: float | None = None
    gap_before: str = ""  # kind of the time outside training steps just before this one

    @property
    def duration(self) -> float:
        return self.t1 - self.t0


@dataclass(frozen=True, slots=True)
class StepStats:
    """Step figures of one process (or of the primary rank) over a window of steps."""

    pid: int | None = None
    rank: int | None = None
    count: int = 0
    steps_per_s: float | None = None
    p50: float | None = None
    p95: float | None = None
    max: float | None = None
    phase_p50: dict[str, float] = field(default_factory=dict)
    data_wait_fraction: float | None = None
    # how the data wait was measured: "dataloader" (its __next__ on the training thread),
    # "before_forward" (a feeder: the wait before each step's first forward), or None
    data_wait_source: str | None = None
    gpu_p50: float | None = None
    last_t: float | None = None
    recent: tuple[StepRow, ...] = ()
    first_t: float | None = None  # its first step's start (the whole run's, not the window's)
    host: str = ""  # the node this process runs on (a collector sees many)
    own_p50: float | None = None  # median of step time outside backward(): the rank's own work
    sync_count: int = 0  # host-device sync events this process reported (all kinds)
    # Whole-run step-time histogram: counts per bucket of ``STEP_BUCKETS`` (last: +Inf),
    # and the sum of all step durations, for cumulative metrics.
    step_hist: tuple[int, ...] = ()
    step_sum_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Trainer:
    """A training process as its hook introduced itself."""

    pid: int
    ppid: int
    host: str
    argv: tuple[str, ...]
    rank: int | None
    local_rank: int | None
    world_size: int | None
    device: str
    torch_version: str
    torch_threads: int | None = None  # torch.get_num_threads() as the hook connected


@dataclass(frozen=True, slots=True)
class Loader:
    pid: int
    loader_id: int
    num_workers: int
    batch_size: int | None
    pin_memory: bool
    prefetch_factor: int | None
    persistent_workers: bool
    workers: tuple[tuple[int, int], ...]
    dataset: str
    t: float
    host: str = ""  # set where a collector merges nodes
    start_method: str = ""  # the workers' (fork, spawn, forkserver); "" none or unknown
    starts: tuple[float, ...] = ()  # its iterators' starts (each epoch's), the latest last
    grad: bool | None = None  # autograd on at its latest iterator's first batch


@dataclass(frozen=True, slots=True)
class ProcessRole:
    """What a pid is to the job: ``main``, ``rank``, ``worker`` or ``other``."""

    pid: int
    role: Role
    rank: int | None = None
    worker_id: int | None = None
    loader_id: int | None = None
    parent_pid: int | None = None
    host: str = ""  # set where a collector merges nodes (pids are only unique per host)


@dataclass(frozen=True, slots=True)
class OutputLine:
    t: float
    stream: str
    text: str


@dataclass(frozen=True, slots=True)
class NoteRow:
    t: float
    level: str
    source: str
    text: str


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
    io_write_bytes: int | None = None
    cpu_percent_avg: float | None = None
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
    iowait_percent_avg: float | None = None
    memory_used_bytes_max: int | None = None
    disk_read_bytes: int | None = None  # over the run
    disk_write_bytes: int | None = None
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


@dataclass(frozen=True, slots=True)
class SyncWatch:
    """Whether the sync detector is looking: the steps it watched (all processes), and
    why it stopped sampling for good where it did ("" while it samples)."""

    watched: int = 0
    paused: str = ""


@dataclass(frozen=True, slots=True)
class SyncSite:
    """A line of user code that made (``sync``) or would make (``potential``) the host wait
    for the device, directly or through a library. ``per_step`` is averaged over the steps
    that were observed."""

    op: str
    file: str
    line: int
    function: str
    kind: SyncKind
    count: int
    per_step: float
    # Host seconds per watched step spent inside this site's calls, waiting for the device:
    # measured on an accelerator in the sampled steps; None on a CPU run (nothing to wait
    # for) and for a site only CUDA's sync debug mode saw.
    blocked_s: float | None = None
    last_step: int | None = None
    # When file/line is the user's line that led into a library which made the call: that
    # library's line (lib_*) and package. With no user frame on the stack, file/line is the
    # library's own line and only ``package`` is set.
    lib_file: str | None = None
    lib_line: int | None = None
    lib_function: str | None = None
    package: str | None = None
    host: str = ""  # set where a collector merges nodes
    # Between-step sites only (``Snapshot.sync_between``): the count per pass, over the
    # passes watched; ``per_step`` is then 0 (such syncs are no step's).
    per_pass: float | None = None
    passes: int | None = None
    # Sampled sites (kind ``potential``, or ``sync`` seen in sampled steps): the watched
    # steps ``per_step`` rests on, its standard error (0 when every step was watched: the
    # exact mode, or a per-step site of the same count in each watched step), and in how many of those steps the site was seen. None where unknown.
    watched: int | None = None
    error: float | None = None
    seen: int | None = None
    # Seen in every watched step: a per-step site, ``per_step`` its mean count in a step.
    every_step: bool = False
    # Every step was watched (the exact mode): error 0 says that only with this (a sampled
    # per-step site of one count in each watched step has error 0 too).
    exact: bool = False
    # A library site reached from user lines: each (file, line, function, count), the most
    # frequent first (the row's own file/line); () where the user's own line made the call.
    callers: tuple[tuple[str, int, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class BetweenRow:
    """Time spent outside training steps, by kind (``eval``, ``checkpoint``, ``other``):
    the whole run's total and count, and the latest interval."""

    kind: str
    total_s: float = 0.0
    count: int = 0
    last_t0: float | None = None
    last_t1: float | None = None
    host: str = ""  # set where a collector merges nodes
    # Passes a forward with grad off opened (no loader): the user's function that made
    # their first module call, the one that held the most of this kind's time
    # (``estimate_loss (train.py:120)``), and its share of the kind's time.
    site: str = ""
    site_s: float = 0.0
    # Time inside top-level forward calls, over the intervals where it was measured
    # (``measured_s`` of them; 0 where none was).
    forward_s: float = 0.0
    measured_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Hint:
    """A diagnosis: a pure rule's verdict over snapshots, with the measured evidence.

    ``est_gain`` is the share of step (or wall) time at stake, 0..1, an upper bound where
    ``est_gain_text`` says so; ``panel`` names the panel whose figures prove it."""

    id: str
    severity: Severity
    title: str
    evidence: tuple[str, ...] = ()
    advice: tuple[str, ...] = ()
    est_gain: float | None = None
    est_gain_text: str = ""
    panel: str = ""
    since_t: float | None = None
    host: str = ""  # set where a collector merges nodes
    until_t: float | None = None  # when it stopped holding (whole-run snapshots only)
    seen_live: bool = True  # the live engine showed it (held ~3 s over 3 evaluations)
    whole_run: bool = False  # the whole-run verdict gives it (whole-run snapshots only)


@dataclass(frozen=True, slots=True)
class NodeRow:
    """A node forwarding to a collector: its name (host, made unique), whether its link is
    up, its job's state and the events it sent."""

    name: str
    connected: bool = True
    state: str = ""
    events: int = 0
    dropped_events: int = 0


@dataclass(frozen=True, slots=True)
class StackRow:
    """One process's stack samples: ``where`` (what it was doing, in words) and ``frames``
    (innermost user frames as (function, file, line)), each with its share of ``samples``."""

    pid: int
    role: Role
    samples: int
    where: tuple[tuple[str, float], ...] = ()
    frames: tuple[tuple[tuple[str, str, int], float], ...] = ()


@dataclass(frozen=True, slots=True)
class StallRow:
    """Stacks captured while a step of ``pid`` was stalled: ``(pid, role, frames)`` each."""

    t: float
    pid: int
    step: int
    stalled_s: float
    median_s: float
    stacks: tuple[tuple[int, str, tuple[tuple[str, str, int], ...]], ...] = ()
    note: str = ""
    during: str = ""  # "eval" or "checkpoint": an interval between steps that hangs
    host: str = ""  # the node whose perftop dumped them (a collector's; "" on one machine)


@dataclass(frozen=True, slots=True)
class Snapshot:
    meta: Meta = field(default_factory=Meta)
    steps: StepStats = field(default_factory=StepStats)
    ranks: tuple[StepStats, ...] = ()
    trainers: tuple[Trainer, ...] = ()
    loaders: tuple[Loader, ...] = ()
    roles: tuple[ProcessRole, ...] = ()
    processes: tuple[ProcRow, ...] = ()
    host: HostRow = field(default_factory=HostRow)
    gpus: tuple[GpuRow, ...] = ()
    gpu_note: str = ""  # why the GPU list is empty ("no NVML", "no GPU"), or a warning
    sync: tuple[SyncSite, ...] = ()  # most costly first
    sync_watch: SyncWatch = field(default_factory=SyncWatch)
    output: tuple[OutputLine, ...] = ()
    output_total: int = 0
    # Training processes with steps whose hook has not sent its last event (yet): once the
    # job ended, each lost its last steps (os._exit, a fatal signal).
    unclosed: tuple[int, ...] = ()
    closed: tuple[int, ...] = ()  # training processes whose hook ended its steps (HookClose)
    notes: tuple[NoteRow, ...] = ()
    events: int = 0
    between: tuple[BetweenRow, ...] = ()  # time outside training steps, by kind
    hints: tuple[Hint, ...] = ()  # most estimated gain first
    # (probe, reason) for each probe ("procs", "host", "gpu") that raised and gave nothing
    probes_stopped: tuple[tuple[str, str], ...] = ()
    nodes: tuple[NodeRow, ...] = ()  # the nodes a collector hears (empty for a local run)
    workers: tuple[WorkerRow, ...] = ()  # DataLoader workers as they measure themselves
    # syncs made outside training steps (evaluation or sampling passes), per pass
    sync_between: tuple[SyncSite, ...] = ()

    # each process's latest interval outside training steps: (pid, kind, t0, t1), t1 None
    # while it runs (an evaluation in progress is not a stalled step)
    between_latest: tuple[tuple[int, str, float, float | None], ...] = ()

    stacks: tuple[StackRow, ...] = ()  # stack samples per process (observer mode)
    stalls: tuple[StallRow, ...] = ()  # stacks captured during stalled steps, oldest first
    captures: tuple[Capture, ...] = ()  # on-demand op captures, oldest first
    comm: CommStats = field(default_factory=CommStats)  # collectives across ranks

    @property
    def latest_capture(self) -> Capture | None:
        """The newest capture (the one the Ops view shows), None before any."""
        return self.captures[-1] if self.captures else None

    def role_of(self, pid: int, host: str | None = None) -> ProcessRole | None:
        """The role of ``pid`` (on ``host``, where a collector merged nodes)."""
        for r in self.roles:
            if r.pid == pid and (host is None or r.host == host):
                return r
        return None

    def independent_trainers(self) -> tuple[StepStats, ...]:
        """The training processes when a job has several that train apart, without ranks
        (hogwild: ``torch.multiprocessing`` processes on one shared model): each one's steps
        are its own, so the job's total is their sum. Empty for one trainer or ranks (a
        distributed step is one step, taken by every rank)."""
        trainers = [r for r in self.ranks if r.count]
        if len(trainers) < 2 or any(r.rank is not None for r in trainers):
            return ()
        return tuple(trainers)

    def probe_stopped(self, probe: str) -> str:
        """Why ``probe`` stopped ("" while it works): its panel says so."""
        return next((why for name, why in self.probes_stopped if name == probe), "")
