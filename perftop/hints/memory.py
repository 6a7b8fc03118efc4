"""The workers' cost in RAM and CPU: ``worker-memory`` (large or growing private memory,
the copy-on-write pattern of a dataset held as Python objects), ``too-many-workers`` and
``cpu-oversubscribed`` (more busy threads than cores).

Workers started with ``spawn`` or ``forkserver`` share no pages with the training process:
each imports torch and the job's modules anew (~150 MiB on CPU torch), which is its
private memory from the start and no copy-on-write. For them only a large or a steadily
growing figure is a hint, said without the copy-on-write story and its advice."""

from __future__ import annotations

from perftop.fmt import count
from perftop.hints.base import fraction, loop, nbytes, threshold, worker_procs
from perftop.model.snapshot import Hint, ProcRow, Snapshot
from perftop.model.workers import WorkerRow

MIB = 2**20
USS_LARGE = 512 * MIB  # private memory per worker that is large whatever its cause
USS_GROWN = 128 * MIB  # ... or this much, after growing by GROWTH since it started
GROWTH = 64 * MIB
# ... or, growing steadily by at least this much a second (every worker), with this much
# still to copy before it holds its whole RSS: the growth is projected to its end
GROW_RATE = 0.5 * MIB
GROW_LEFT = 64 * MIB
MEM_LOW = 0.10  # host memory available below this share of the total is pressure
CPU_BUSY = 90.0
IDLE_WORKERS = 0.2
BUSY_WORKER = 0.25  # a worker on the CPU this share of the time keeps a core busy
WORKER_THREADS = (
    "Keep workers single-threaded: torch does; for OpenCV call cv2.setNumThreads(1), for numpy "
    "set OMP_NUM_THREADS=1."
)
BUSY_TRAINER = 0.5  # a training process using this many cores runs its torch threads


def worker_memory(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    procs = [p for _, p in worker_procs(snap) if p.uss_bytes is not None]
    if not procs:
        return []
    k = 0.8 if "worker-memory" in active else 1.0
    n = len(procs)
    uss = sum(p.uss_bytes or 0 for p in procs) / n
    methods = {ld.start_method for ld in snap.loaders if ld.num_workers}
    spawned = bool(methods) and methods <= {"spawn", "forkserver"}
    first = [p.uss_bytes_first for p in procs if p.uss_bytes_first is not None]
    # a spawned worker's growth since its start is its imports, no dataset's pages copied
    grown = uss - sum(first) / len(first) if len(first) == n and not spawned else 0.0
    # ... and so is its steady rise while young (sampled every tick for its first 30 s)
    growing = None if spawned else _growth(procs, k)
    if not (uss >= k * USS_LARGE or (uss >= k * USS_GROWN and grown >= k * GROWTH) or growing):
        return []
    total = sum(p.uss_bytes or 0 for p in procs)
    ev = [
        f"{count(n, 'worker')} hold {nbytes(total)} of private memory (USS) together, "
        f"{nbytes(uss)} each"
        + (f", up {nbytes(grown)} since they started" if grown >= GROWTH / 2 else "")
    ]
    h = snap.host
    if growing is not None:
        rate, rss, eta = growing
        ev.append(
            f"each grows steadily by {nbytes(rate)}/s; at this pace it reaches its RSS, "
            f"{nbytes(rss)} (every page it shares with the training process copied: the "
            f"most it can hold), in about {_duration(eta)}; {nbytes(rss * n)} for the "
            f"{count(n, 'worker')}"
            + (
                ", more than the host has available"
                if h.mem_available_bytes is not None and (rss - uss) * n > h.mem_available_bytes
                else ""
            )
        )
    if spawned:
        ev.append(
            f"the workers are started with {' and '.join(sorted(methods))}: they share no "
            "memory with the training process, each holds its own interpreter, torch and "
            "what it builds"
        )
    elif grown >= GROWTH / 2 or growing is not None:
        ev.append(
            "private memory that grows as workers read the dataset is the copy-on-write "
            "pattern: touching Python objects (their reference counts) copies the pages "
            "they share with the training process"
        )
    low = False
    if h.mem_total_bytes and h.mem_available_bytes is not None:
        low = h.mem_available_bytes < MEM_LOW * h.mem_total_bytes
        ev.append(
            f"the host has {nbytes(h.mem_available_bytes)} of {nbytes(h.mem_total_bytes)} "
            "memory available"
        )
    more = max(8, 2 * n)
    ev.append(f"at {nbytes(uss)} each, {more} workers would hold {nbytes(uss * more)}")
    dataset = next((ld.dataset for ld in snap.loaders if ld.num_workers), "")
    what = f" ({dataset})" if dataset else ""
    return [
        Hint(
            id="worker-memory",
            severity="high" if low or (h.swap_used_bytes or 0) > 0 else "medium",
            title=f"Worker memory: each DataLoader worker holds {nbytes(uss)} of its own"
            + (", and growing" if growing is not None else ""),
            evidence=tuple(ev),
            advice=_spawned_advice(what) if spawned else _advice(what),
            est_gain=None,
            est_gain_text=f"memory, not speed: {nbytes(total)} of RAM",
            panel="procs",
        )
    ]


def _advice(what: str) -> tuple[str, ...]:
    return (
        f"Store the dataset{what} as numpy arrays or tensors (a few large objects) "
        "instead of lists or dicts of Python objects.",
        "Call gc.freeze() after building the dataset and before the DataLoader "
        "starts its workers, so the garbage collector does not touch every object.",
        "Use fewer workers: each one costs this much RAM.",
    )


def _spawned_advice(what: str) -> tuple[str, ...]:
    return (
        "Use fewer workers: each one costs this much RAM.",
        f"Keep what each worker builds small: the dataset{what} is pickled to every "
        "worker, and what it loads at start is loaded once per worker.",
    )


def _growth(procs: list[ProcRow], k: float) -> tuple[float, float, float] | None:
    """(bytes/s, RSS, seconds left) when every worker's private memory grows steadily (the
    model's fit, ``ProcRow.uss_growth_bps``) by ``GROW_RATE`` or more and has at least
    ``GROW_LEFT`` of its RSS still shared: the copy-on-write growth, projected to the time
    each worker holds all of it. The slowest worker's pace, the largest RSS."""
    rates = [p.uss_growth_bps for p in procs]
    if any(r is None or r < k * GROW_RATE for r in rates):
        return None
    rate = min(r for r in rates if r is not None)
    rss = max(p.rss_bytes or 0 for p in procs)
    left = max(rss - (p.uss_bytes or 0) for p in procs)
    if left < k * GROW_LEFT:
        return None
    return rate, float(rss), left / rate


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


# A hint about the job's own settings needs the job to fill the cores, not other users.
JOB_SHARE = 0.7


def job_cores(snap: Snapshot) -> float:
    """The cores the job's live processes (trainers and workers) keep busy, as the process
    probe measures them; 0 where it has measured none."""
    return sum(p.cpu_percent or 0.0 for p in snap.processes if p.alive) / 100.0


def too_many_workers(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    lp = loop(snap)
    ld = lp.loader if lp is not None else None
    if lp is None or ld is None or ld.num_workers < 2:
        return []
    nw, cores = ld.num_workers, snap.host.cpu_count
    cpu = snap.host.cpu_percent
    ev: list[str] = []
    advice: list[str] = []
    job = job_cores(snap)
    if cores and nw > cores and cpu is not None and cpu >= CPU_BUSY and job >= JOB_SHARE * cores:
        ev.append(
            f"{nw} workers on {count(cores, 'core')}, the host CPU {cpu:.0f}% busy; "
            f"the job uses {job:.1f} cores"
        )
        advice.append(
            f"Use at most {max(1, cores - 1)} workers: more only take turns on the cores."
        )
    busy = lp.workers_busy
    bar = threshold("too-many-workers", active, IDLE_WORKERS, IDLE_WORKERS * 1.5)
    if busy is not None and busy < bar and nw >= 4 and lp.data_share < 0.05:
        need = lp.workers_needed() or 1
        ev.append(
            f"the {nw} workers are busy {fraction(busy)} of the time and the loop waits "
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
    cores, cpu = h.cpu_count, h.cpu_percent
    if not cores or cpu is None or cpu < threshold("cpu-oversubscribed", active, CPU_BUSY, 80):
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
    job = job_cores(snap)
    if job < JOB_SHARE * cores:
        return []  # the host is busy with other work, not with this job
    parts = [f"{threads} torch threads in the training process" + ("es" if len(main) > 1 else "")]
    if workers:
        parts.append(f"{count(len(workers), 'busy DataLoader worker')} ({wthreads} threads)")
    ev = [
        f"the job runs {threads + wthreads} busy compute threads on {count(cores, 'core')}: "
        + " and ".join(parts)
        + (f" ({count(idle, 'idle worker')} not counted)" if idle > 0 else ""),
        f"the host CPU is {cpu:.0f}% busy; the job uses {job:.1f} cores",
    ]
    if h.load is not None:
        ev.append(f"load average {h.load[0]:.1f}")
    # A torch thread a core, the cores the busy workers leave shared among the busy trainers
    # (hogwild processes, or several jobs' worth of trainers on one host).
    n = len(busy_main)
    each = max(1, (cores - len(workers)) // n)
    where = "the training process" if n == 1 else f"each of the {n} training processes"
    if workers:
        advice: tuple[str, ...] = (
            f"torch.set_num_threads({each}) in {where} leaves a core to each busy worker.",
            WORKER_THREADS,
        )
    else:
        advice = (f"torch.set_num_threads({each}) in {where}: one compute thread a core.",)
    return [
        Hint(
            id="cpu-oversubscribed",
            severity="medium",
            title=f"CPU oversubscribed: {threads + wthreads} busy threads on {cores} cores",
            evidence=tuple(ev),
            advice=advice,
            est_gain=None,
            est_gain_text="not measurable: threads that take turns slow each other down",
            panel="host",
        )
    ]
