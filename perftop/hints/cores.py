"""The job's threads against the cores it may use: ``too-many-workers`` (more workers than
the cores or the loop need) and ``cpu-oversubscribed`` (more busy threads than cores).

The cores are those the job may use (model/cores.py): a Slurm step's or a container's
few of a node's, not the node's; where a cgroup's CPU limit binds, the job at its limit is
as busy as the host would have to be.
"""

from __future__ import annotations

from perftop.fmt import count
from perftop.hints.base import fraction, loop, threshold
from perftop.model.cores import JobCores, allowed_cores, whole
from perftop.model.snapshot import Hint, Snapshot
from perftop.model.workers import WorkerRow

CPU_BUSY = 90.0
IDLE_WORKERS = 0.2
BUSY_WORKER = 0.25  # a worker on the CPU this share of the time keeps a core busy
WORKER_THREADS = (
    "Keep workers single-threaded: torch does; for OpenCV call cv2.setNumThreads(1), for numpy "
    "set OMP_NUM_THREADS=1."
)
BUSY_TRAINER = 0.5  # a training process using this many cores runs its torch threads
# A hint about the job's own settings needs the job to fill the cores, not other users.
JOB_SHARE = 0.7
# Other processes hold the job's cores (cpu-contention's case) where they keep at least
# OTHERS_MIN cores busy, or OTHERS_SHARE of the job's where it may use fewer than 2.
OTHERS_MIN = 0.5
OTHERS_SHARE = 0.3
AT_LIMIT = 0.8  # the job's CPU use, as a share of its cgroup's CPU limit, that fills it


def job_cores(snap: Snapshot) -> float:
    """The cores the job's processes keep busy, as the process probe measures them; 0
    where it has measured none. Live, an exited process has no CPU figure; in the
    whole-run view (verdict.py) it has its share of the run's, and the trainers and the
    last workers their averages over their own lives, which can sum to more than the
    cores the job may use (1.2 of a 1-core affinity): at most those cores, which it
    cannot exceed."""
    used = sum(p.cpu_percent or 0.0 for p in snap.processes) / 100.0
    usable = allowed_cores(snap).usable
    return min(used, usable) if usable > 0 else used


def others_cores(snap: Snapshot, jc: JobCores, job: float) -> float | None:
    """The cores of those the job may use that processes other than the job's and
    perftop's keep busy; None where their busy share is not known."""
    cpu = jc.busy_percent
    if cpu is None or not jc.usable:
        return None
    mon = snap.meta.monitor_cpu_percent  # None: not said (an older recording)
    return cpu / 100.0 * jc.usable - job - (mon or 0.0) / 100.0


def crowded(snap: Snapshot, jc: JobCores, job: float) -> bool:
    """Other processes, not the job, hold its cores: ``cpu-contention``'s case, and
    ``cpu-oversubscribed``'s everywhere else, so that on full cores one of them speaks (a
    job at 69.8% of its one core, its 2 torch threads waiting 45% of the time, beside
    others at 0.2 of it got neither)."""
    others = others_cores(snap, jc, job)
    if others is None:
        return False
    return others >= min(OTHERS_MIN, OTHERS_SHARE * jc.usable) and job < JOB_SHARE * jc.usable


def too_many_workers(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    lp = loop(snap)
    ld = lp.loader if lp is not None else None
    if lp is None or ld is None or ld.num_workers < 2:
        return []
    nw = ld.num_workers
    jc = allowed_cores(snap)
    cores = jc.usable
    ev: list[str] = []
    advice: list[str] = []
    job = job_cores(snap)
    busy = full(jc, job, CPU_BUSY)
    if cores and nw > cores and busy is not None and not crowded(snap, jc, job):
        ev.append(f"{nw} workers on {jc.text()}, {busy}")
        advice.append(
            f"Use at most {count(max(1, whole(cores) - 1), 'worker')}: more only take turns "
            "on the cores."
        )
    working = lp.workers_busy
    bar = threshold("too-many-workers", active, IDLE_WORKERS, IDLE_WORKERS * 1.5)
    if working is not None and working < bar and nw >= 4 and lp.data_share < 0.05:
        need = lp.workers_needed() or 1
        ev.append(
            f"the {nw} workers are busy {fraction(working)} of the time and the loop waits "
            f"{fraction(lp.data_share)} of a step: about {need} would keep up"
        )
        advice.append(f"num_workers={max(need, 2)} would do: each idle worker still holds RAM.")
    if not ev:
        return []
    return [
        Hint(
            id="too-many-workers",
            severity="medium" if len(advice) and nw > (cores or nw) else "info",
            title=f"Too many DataLoader workers: {nw} for this job",
            evidence=tuple(ev),
            advice=tuple(advice),
            est_gain=None,
            est_gain_text="CPU time and RAM, not step time",
            panel="procs",
        )
    ]


def busy_workers(snap: Snapshot, trainers: set[int]) -> list[WorkerRow]:
    """The trainers' live DataLoader workers that keep a core busy: on the CPU at least
    ``BUSY_WORKER`` of the time, as they measure themselves (busy share x CPU share), or
    as the process probe saw them where they have not reported yet. An idle worker waits
    on its index queue and takes no core from anyone."""
    cpu = {p.pid: p.cpu_percent for p in snap.processes if p.alive}
    out = []
    for w in snap.workers:
        if w.exited or w.ppid not in trainers:
            continue
        if w.busy_share is not None and w.cpu_share is not None:
            on_cpu: float | None = w.busy_share * w.cpu_share
        else:
            pct = cpu.get(w.pid)
            on_cpu = None if pct is None else pct / 100.0
        if on_cpu is not None and on_cpu >= BUSY_WORKER:
            out.append(w)
    return out


def cpu_oversubscribed(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    """More busy compute threads than cores: the training processes' torch threads (while
    the process keeps at least a core busy) and the threads of the workers that are busy."""
    h = snap.host
    jc = allowed_cores(snap)
    cores = jc.usable
    job = job_cores(snap)
    busy = full(jc, job, threshold("cpu-oversubscribed", active, CPU_BUSY, 80))
    if not cores or busy is None:
        return []
    main = {t.pid: t for t in snap.trainers}
    pcpu = {p.pid: p.cpu_percent or 0.0 for p in snap.processes if p.alive}
    busy_main = [t for t in main.values() if pcpu.get(t.pid, 0.0) >= 100.0 * BUSY_TRAINER]
    threads = sum(t.torch_threads or 0 for t in busy_main)
    workers = busy_workers(snap, set(main))
    idle = sum(1 for w in snap.workers if not w.exited and w.ppid in main) - len(workers)
    wthreads = sum(w.torch_threads or 1 for w in workers)
    if not busy_main or threads + wthreads <= cores:
        return []
    if crowded(snap, jc, job):
        return []  # the host is busy with other work, not with this job
    parts = [
        count(threads, "torch thread")
        + " in the training process"
        + ("es" if len(main) > 1 else "")
    ]
    if workers:
        parts.append(f"{count(len(workers), 'busy DataLoader worker')} ({wthreads} threads)")
    ev = [
        f"the job runs {threads + wthreads} busy compute threads on {jc.text()}: "
        + " and ".join(parts)
        + (f" ({count(idle, 'idle worker')} not counted)" if idle > 0 else ""),
        busy,
    ]
    if h.load is not None:
        ev.append(f"load average {h.load[0]:.1f}")
    # A torch thread a core, the cores the busy workers leave shared among the busy trainers
    # (hogwild processes, or several jobs' worth of trainers on one host).
    n = len(busy_main)
    each = max(1, (whole(cores) - len(workers)) // n)
    where = "the training process" if n == 1 else f"each of the {n} training processes"
    if workers and whole(cores) - len(workers) < n:  # no core left for each trainer
        advice: tuple[str, ...] = (
            f"torch.set_num_threads(1) in {where}; the {count(len(workers), 'busy worker')} "
            + ("still takes" if len(workers) == 1 else "still take")
            + f" turns with it on {count(whole(cores), 'core')}: fewer workers, or more "
            "cores for the job.",
            WORKER_THREADS,
        )
    elif workers:
        advice = (
            f"torch.set_num_threads({each}) in {where} leaves a core to each busy worker.",
            WORKER_THREADS,
        )
    else:
        advice = (f"torch.set_num_threads({each}) in {where}: one compute thread a core.",)
    return [
        Hint(
            id="cpu-oversubscribed",
            severity="medium",
            title=f"CPU oversubscribed: {threads + wthreads} busy threads on {cores:g} "
            + ("core" if cores == 1 else "cores"),
            evidence=tuple(ev),
            advice=advice,
            est_gain=None,
            est_gain_text="not measurable: threads that take turns slow each other down",
            panel="host",
        )
    ]


def full(jc: JobCores, job: float, bar: float) -> str | None:
    """How the cores the job may use are full, said as evidence; None where they are not:
    at ``bar``% busy (the CPUs its affinity allows, or the host's), or, where a cgroup's
    CPU limit binds, the job at :data:`AT_LIMIT` of it."""
    if jc.quota is not None:
        if job < AT_LIMIT * jc.quota:
            return None
        return f"the job uses {job:.1f} of the {jc.quota:g} cores its cgroup's CPU limit allows"
    cpu = jc.busy_percent
    if cpu is None or cpu < bar:
        return None
    where = "the host CPU is" if jc.cpus is None else "the CPUs the job may run on are"
    return f"{where} {cpu:.0f}% busy; the job uses {job:.1f} cores"
