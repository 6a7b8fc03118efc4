"""Immutable snapshots of a session: what the TUI renders, hints read and reports print.

Every part is a frozen dataclass of plain values, so a snapshot can cross threads and be
kept for comparison without copying. Parts owned by other modules (probes, sync) default to
empty so a snapshot is always complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perftop.fmt import exit_words
from perftop.fmt import signal_name as signal_name
from perftop.model.capture import Capture
from perftop.model.comm_rows import CommStats, rank_name

# The rows of the job's processes, the probes', the findings' and those of what the steps
# do not time live apart; importers name them from here too.
from perftop.model.finding_rows import Hint as Hint
from perftop.model.finding_rows import Severity as Severity
from perftop.model.finding_rows import SyncSite as SyncSite
from perftop.model.finding_rows import SyncWatch as SyncWatch
from perftop.model.job_rows import Loader as Loader
from perftop.model.job_rows import ProcessRole as ProcessRole
from perftop.model.job_rows import Role as Role
from perftop.model.job_rows import Trainer as Trainer
from perftop.model.outside_rows import BetweenRow as BetweenRow
from perftop.model.outside_rows import StackRow as StackRow
from perftop.model.outside_rows import StallRow as StallRow
from perftop.model.probe_rows import GpuProcRow as GpuProcRow
from perftop.model.probe_rows import GpuRow as GpuRow
from perftop.model.probe_rows import HostRow as HostRow
from perftop.model.probe_rows import NodeRow as NodeRow
from perftop.model.probe_rows import ProcRow as ProcRow
from perftop.model.workers import WorkerRow

PHASES = ("data", "forward/other", "backward", "optimizer")


def ended_words(code: int | None, sig: int) -> str:
    """``exited with code N``, or ``was killed by SIGKILL (exit code 137)``."""
    if sig:
        return f"was {exit_words(None, sig)} (exit code {code})"
    return f"exited with code {code}"


@dataclass(frozen=True, slots=True)
class Meta:
    command: tuple[str, ...] = ()
    cwd: str = ""
    host: str = ""
    start_t: float | None = None
    now_t: float | None = None
    job_pid: int | None = None
    exit_code: int | None = None
    exit_signal: int = 0  # the signal that killed the job (JobExit.signal); 0: none seen
    exit_t: float | None = None
    ended: bool = False  # the job is over, even when its exit code is not known
    record_path: str = ""
    dropped_events: int = 0
    rejected_frames: int = 0
    monitor_cpu_percent: float | None = None  # perftop's own CPU, its latest reading
    monitor_cpu_avg: float | None = None  # ... the mean of all its readings so far
    monitor_rss_bytes: int | None = None
    perftop_version: str = ""
    monitor_dropped: int = 0  # events the monitor's own bounded ingest queue dropped
    observer: bool = False  # watching a process without a hook (``perftop attach PID``)
    observer_python: str = ""
    output_to: str = ""  # where the job's output went (SessionStart.output; "": not said)
    node: str = ""  # the node of a collector's this session models ("": the machine it ran on)

    @property
    def state(self) -> str:
        if self.exit_code is not None:
            if self.exit_signal:
                return f"killed ({signal_name(self.exit_signal)})"
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


# what a data wait read before the first forward is (``data_wait_source``), in words
BEFORE_FORWARD = "before forward: the training thread's time off the CPU, no DataLoader"


@dataclass(frozen=True, slots=True)
class StepStats:
    """Step figures of one process (or of the primary rank) over a window of steps."""

    pid: int | None = None
    rank: int | None = None
    count: int = 0
    steps_per_s: float | None = None  # over the steps' own time: time between them left out
    wall_steps_per_s: float | None = None  # over the wall time, time between steps included
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
    first_end_t: float | None = None  # ... and its end (report: loaders made after it)
    host: str = ""  # the node this process runs on (a collector sees many)
    own_p50: float | None = None  # median of step time outside backward(): the rank's own work
    sync_count: int = 0  # host-device sync events this process reported (all kinds)
    # Whole-run step-time histogram: counts per bucket of ``STEP_BUCKETS`` (last: +Inf),
    # and the sum of all step durations, for cumulative metrics.
    step_hist: tuple[int, ...] = ()
    step_sum_s: float = 0.0


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
class Snapshot:
    meta: Meta = field(default_factory=Meta)
    steps: StepStats = field(default_factory=StepStats)
    ranks: tuple[StepStats, ...] = ()
    trainers: tuple[Trainer, ...] = ()
    loaders: tuple[Loader, ...] = ()
    roles: tuple[ProcessRole, ...] = ()
    processes: tuple[ProcRow, ...] = ()
    # the processes seen to end abnormally, or with no status read: kept past the live
    # window's exited rows (a rank that died, named in a hang seconds later; stands.py)
    ended: tuple[ProcRow, ...] = ()
    host: HostRow = field(default_factory=HostRow)
    gpus: tuple[GpuRow, ...] = ()
    gpu_note: str = ""  # why the GPU list is empty ("no NVML", "no GPU"), or a warning
    sync: tuple[SyncSite, ...] = ()  # most costly first
    sync_watch: SyncWatch = field(default_factory=SyncWatch)
    output: tuple[OutputLine, ...] = ()
    output_total: int = 0
    # Training processes with steps whose hook has not sent its last event (yet), (host,
    # pid) as the process rows name them (host "" but on a collector): once the job ended,
    # each lost its last steps (os._exit, a fatal signal).
    unclosed_at: tuple[tuple[str, int], ...] = ()
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
    # passes between steps the sync detector may watch, of every process (``between`` is
    # the primary's): what ``sync_watch.passes``, of every process too, is out of
    passes_run: int = 0

    stacks: tuple[StackRow, ...] = ()  # stack samples per process (observer mode)
    stalls: tuple[StallRow, ...] = ()  # stacks captured during stalled steps, oldest first
    captures: tuple[Capture, ...] = ()  # on-demand op captures, oldest first
    comm: CommStats = field(default_factory=CommStats)  # collectives across ranks

    @property
    def unclosed(self) -> tuple[int, ...]:
        """The pids of :attr:`unclosed_at` (``cut_short``: on a collector, of every node)."""
        return tuple(pid for _host, pid in self.unclosed_at)

    def cut(self, pid: int, host: str = "") -> bool:
        """Whether ``pid`` (on ``host``, a collector's node) is a training process whose hook
        has not sent its last event: two nodes' trainers often have one pid (containers)."""
        return (host, pid) in self.unclosed_at

    @property
    def latest_capture(self) -> Capture | None:
        """The newest capture (the one the Ops view shows), None before any."""
        return self.captures[-1] if self.captures else None

    def rank_label(self, rank: int | None, pid: int | None, host: str) -> str:
        """A rank as the hints and the Ranks view name it: by its host where the ranks ran
        on several hosts or this is a collector's node ("rank 1 on node-b"), else by its
        rank alone (one machine's name said nothing)."""
        many = bool(self.meta.node) or len({r.host for r in self.ranks}) > 1
        return rank_name(rank, pid, host if many else "")

    def role_of(self, pid: int, host: str | None = None) -> ProcessRole | None:
        """The role of ``pid`` (on ``host``, where a collector merged nodes)."""
        for r in self.roles:
            if r.pid == pid and (host is None or r.host == host):
                return r
        return None

    def train_threads(self) -> dict[int, int]:
        """pid -> the native id of its training thread, where its hook saw it train on
        another than the main thread (``Trainer.train_tid``): where the process probe reads
        its wait for a core and a stall's capture its stacks."""
        return {t.pid: t.train_tid for t in self.trainers if t.train_tid is not None}

    def independent_trainers(self) -> tuple[StepStats, ...]:
        """The training processes when a job has several that train apart, without ranks
        (hogwild: ``torch.multiprocessing`` processes on one shared model): each one's steps
        are its own, so the job's total is their sum. Empty for one trainer or ranks (a
        distributed step is one step, taken by every rank)."""
        trainers = [r for r in self.ranks if r.count]
        if len(trainers) < 2 or any(r.rank is not None for r in trainers):
            return ()
        return tuple(trainers)

    def running_workers(self) -> int:
        """DataLoader workers now: while the job runs, an exited one (still listed a few
        seconds, struck through; a loader made anew each evaluation leaves many) is not."""
        gone = (
            {(p.host, p.pid) for p in self.processes if not p.alive}
            | {("", w.pid) for w in self.workers if w.exited}
            if self.meta.exit_code is None
            else set()
        )
        return sum(1 for r in self.roles if r.role == "worker" and (r.host, r.pid) not in gone)

    def probe_stopped(self, probe: str) -> str:
        """Why ``probe`` stopped ("" while it works): its panel says so."""
        return next((why for name, why in self.probes_stopped if name == probe), "")
