"""Core events: the session header, the hook's per-process and per-step facts, job lifecycle.

All timestamps are wall-clock seconds since the epoch (``time.time()`` scale) so events from
several processes and hosts line up; durations are seconds.
"""

from __future__ import annotations

from perftop.events.base import FORMAT_VERSION, Event, event


@event("session")
class SessionStart(Event):
    """First event of a recording: what was run, where and when."""

    t: float
    command: tuple[str, ...]
    cwd: str
    host: str
    monitor_pid: int
    perftop_version: str
    version: int = FORMAT_VERSION
    record_path: str = ""
    # the hang thresholds the monitor was run with (PERFTOP_HANG_FACTOR, PERFTOP_HANG_AFTER),
    # where set: a viewer, a replay and a report judge hangs as the session did
    hang_factor: float | None = None
    hang_after_s: float | None = None
    # where the job's stdout and stderr went: "captured" (perftop tails them: the TUI,
    # --stream-out; ``output`` events), "terminal" (headless: the job writes to its own
    # terminal, and no line of it is in the session); "" not said (an older writer, a viewer)
    output: str = ""


@event("hello")
class Hello(Event):
    """First event on a hook connection: who this training process is."""

    t: float
    pid: int
    ppid: int
    host: str
    argv: tuple[str, ...]
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    torch_version: str = ""
    device: str = "cpu"
    version: int = FORMAT_VERSION
    worker_id: int | None = None  # a DataLoader worker's hook (not a trainer)
    torch_threads: int | None = None  # torch.get_num_threads() when it connected
    closes: bool = False  # it ends with a HookClose: one that does not came to no clean end


@event("hook_close")
class HookClose(Event):
    """A hook's last event, sent after everything else in its exit flush. A process whose
    hook said it sends one (``Hello.closes``) and ended without it lost its last steps:
    ``os._exit``, a fatal signal, or an exit flush out of time."""

    t: float
    pid: int


@event("train_thread")
class TrainThread(Event):
    """The training loop of ``pid`` runs on thread ``tid`` (its native id), not on the
    main thread (a Ray Train worker's training function, a trainer a GUI starts), or back
    on it (``tid == pid``). The monitor reads that thread's wait for a core and its stacks
    in a stall: the main thread of such a process waits in a join or an event loop."""

    t: float
    pid: int
    tid: int


@event("step")
class Step(Event):
    """One training step of one process, with where its time went.

    ``other`` is derived (``duration - data - backward - optimizer``); ``phases`` holds the
    user's own ``perftop.phase()`` spans, which may overlap the built-in ones.
    """

    pid: int
    index: int
    t0: float
    t1: float
    data: float = 0.0
    backward: float = 0.0
    optimizer: float = 0.0
    phases: dict[str, float] | None = None
    source: str = ""

    @property
    def duration(self) -> float:
        return self.t1 - self.t0

    @property
    def other(self) -> float:
        return max(0.0, self.duration - self.data - self.backward - self.optimizer)


@event("between")
class Between(Event):
    """Time outside training steps (an evaluation pass, a checkpoint): ``kind`` is
    ``eval``, ``rollout``, ``checkpoint``, ``checkpoint_overlapped`` or ``report`` (Ray
    Train's ``report`` call; older recordings have none), from ``t0`` for ``length``
    seconds. The steps around it do not include it (see perftop/hook/gaps.py for what
    decides, pass_meter.py for what is measured). A pass a forward with grad off
    opened has ``site``, the user's function that made its first module call
    (``collect_rollouts (stable_baselines3/common/on_policy_algorithm.py:183)``: a
    library's file from its package's folder; older recordings name its file alone), and
    ``forward_s``, its time inside top-level module calls (-1: not measured; older
    recordings have neither)."""

    pid: int
    kind: str
    t0: float
    length: float
    site: str = ""
    forward_s: float = -1.0


@event("between_open")
class BetweenOpen(Event):
    """An interval outside training steps began at ``t0``: ``kind`` as far as it is known
    then (``eval``; ``rollout`` where its call site's pass was one; ``checkpoint`` for a
    ``torch.save``); another with the same ``t0`` says more (``rollout`` once the pass is
    seen stepping an environment). Its ``Between`` follows when training resumes. It lets
    the monitor tell an evaluation in progress from a stalled step."""

    pid: int
    kind: str
    t0: float


@event("gpu_time")
class StepGpu(Event):
    """GPU time of an earlier step, from CUDA events resolved without synchronizing."""

    pid: int
    index: int
    gpu_s: float


@event("loader")
class LoaderInfo(Event):
    """A DataLoader iterator started: its settings and its worker processes."""

    t: float
    pid: int
    loader_id: int
    num_workers: int
    batch_size: int | None
    pin_memory: bool
    prefetch_factor: int | None
    persistent_workers: bool
    workers: tuple[tuple[int, int], ...] = ()  # (worker_id, pid)
    dataset: str = ""
    start_method: str = ""  # the workers' (fork, spawn, forkserver); "" none or unknown
    # autograd on at the iterator's first batch: a training loader's, where an evaluation's
    # runs with grad off; None: not known (a recording from before it was kept)
    grad: bool | None = None


@event("dropped")
class Dropped(Event):
    """Events a producer had to drop (its buffer was full); ``total`` is cumulative."""

    t: float
    pid: int
    total: int
    source: str = "hook"


@event("job_start")
class JobStart(Event):
    """The monitor launched (or attached to) the job's top process."""

    t: float
    pid: int
    argv: tuple[str, ...] = ()


@event("job_exit")
class JobExit(Event):
    """The job's top process ended; ``exit_code`` follows the shell's 128+signal rule.
    ``known`` is False when a detached recorder saw the job end but could not learn how.
    ``signal``: the signal that killed it, where perftop saw it killed (its wait status,
    not the code: a job may ``exit(137)``); 0 when it exited (older recordings: 0)."""

    t: float
    pid: int
    exit_code: int
    known: bool = True
    signal: int = 0


@event("output")
class Output(Event):
    """Lines the job wrote to stdout or stderr (captured when the TUI owns the terminal)."""

    t: float
    stream: str
    text: str


@event("note")
class Note(Event):
    """Something a user should know about the monitoring itself (no NVML, frames rejected)."""

    t: float
    level: str
    source: str
    text: str


@event("monitor")
class MonitorStats(Event):
    """perftop's own health: its CPU use, the frames it had to reject, and the events its
    bounded ingest queue had to drop (``dropped``, cumulative) when the model fell behind."""

    t: float
    cpu_percent: float
    rss_bytes: int
    rejected_frames: int = 0
    events: int = 0
    dropped: int = 0
