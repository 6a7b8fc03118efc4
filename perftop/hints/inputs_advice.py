"""What ``input-bound`` (:mod:`perftop.hints.inputs`) advises, from the evidence: busy
workers with idle cores want more workers (as many as the idle cores take); busy workers
on busy cores want cheaper batches; idle workers with a waiting loop point at moving the
batches; bursts every ``num_workers`` steps show workers that each make a whole batch too
slowly."""

from __future__ import annotations

from perftop.fmt import count
from perftop.hints.base import (
    Loop,
    fraction,
    nbytes,
    rate,
    seconds,
    workers_core_wait,
)
from perftop.hints.cores import crowded, job_cores, others_cores
from perftop.hints.restarts import ADVICE as RESTART_ADVICE
from perftop.hints.restarts import Restarts
from perftop.hints.restarts import evidence as restart_evidence
from perftop.model.cores import JobCores, allowed_cores, whole
from perftop.model.snapshot import Snapshot
from perftop.model.stats import median

SATURATED = 0.75  # workers busy this share of the time make batches as fast as they can
IDLE_WORKERS = 0.5
SMALL_BATCH = 1 << 20  # bytes: a batch this small costs its trip, not its size, to move
CPU_BUSY = 85.0  # host CPU %, beyond which more workers only compete for cores


def advice(
    snap: Snapshot, lp: Loop, ev: list[str], rs: Restarts | None
) -> tuple[list[str], int | None]:
    """What to try, and the workers' count it advises (None: no count to set)."""
    ld = lp.loader
    jc = allowed_cores(snap)
    cores, cpu, cpu_txt = _job_cpu(snap, jc)
    if ld is not None and ld.num_workers == 0:
        ev.append(f"num_workers=0: the training process loads every batch itself ({ld.dataset})")
        n = max(2, round(lp.data_s / lp.compute_s * 1.1 + 0.5)) if lp.compute_s > 0 else 2
        if jc.usable:
            n = min(n, max(1, whole(jc.usable) - 1))
        held = _no_core_to_spare(snap, jc)
        if held:
            ev.append(held)
            return [
                f"Where a core is free, DataLoader(..., num_workers={n}) overlaps loading "
                "with the training step; on these cores a worker takes turns for the CPU, "
                "so it hides only the loading's waits (file reads), not its computing."
            ], None
        return [
            f"Load batches in background processes: DataLoader(..., num_workers={n}) "
            "overlaps loading with the training step."
        ], n
    busy, made, want = lp.workers_busy, lp.made_per_s, lp.wanted_per_s
    nw = ld.num_workers if ld is not None else len(lp.workers)
    seen = len(lp.workers) or nw  # the workers measured
    off = 1 - lp.workers_cpu if lp.workers_cpu is not None else 0.0
    core_wait = workers_core_wait(snap, lp)
    if core_wait is not None:
        core_wait = min(core_wait, off)  # (their windows differ: the probe's, the reports')
    # off the CPU less the measured wait for a core: reads, sleeps, locks (what more
    # workers overlap); unmeasured, all of it
    blocked = off if core_wait is None else off - core_wait
    need = lp.workers_needed()
    if lp.workers and made is not None:
        each = seconds(lp.batch_s)
        ev.append(
            (
                f"1 worker makes {rate(made)} batches/s ({each} per batch, "
                if len(lp.workers) == 1
                else f"{len(lp.workers)} workers make {rate(made)} batches/s together "
                f"({each} per batch each, "
            )
            + f"busy {fraction(busy)} of the time); "
            f"the loop would take {rate(want)}/s"
            + (
                f"; about {need} workers would keep up{_cores(blocked)}"
                if need and need > nw
                else ""
            )
        )
    if rs is not None:
        ev.append(restart_evidence(rs))
    if cpu_txt:
        ev.append(cpu_txt)
    burst = _bursts(lp, nw)
    if burst:
        ev.append(burst)
    out: list[str] = []
    advised: int | None = None
    if busy is not None and busy >= SATURATED:
        idle_cores = None if cores is None or cpu is None else cores * (1 - cpu / 100.0)
        # workers that mostly wait need little CPU: the extra ones must fit in a core or
        # in the idle cores (else they only take turns on busy ones)
        extra = (need - nw) * (lp.workers_cpu or 0.0) if need else 0.0
        free = max(1.0, idle_cores or 0.0)
        if need and need > nw and blocked >= 0.5 and extra <= free:
            advised = need
            out.append(
                f"Raise num_workers from {nw} to about {need}: {they(seen, 'is', 'are')} busy "
                f"{fraction(busy)} of the time, mostly waiting off the CPU, so more of "
                "them overlap the waiting."
            )
        elif cpu is not None and cpu < CPU_BUSY and need and need > nw:
            fits = idle_cores is None or need - nw <= idle_cores + 1
            advised = need if fits else None
            where = "the host has" if jc.usable == jc.host else "the job's cores have"
            if fits or idle_cores is None:
                out.append(
                    f"Raise num_workers from {nw} to about {need}: {they(seen, 'is', 'are')} busy "
                    f"{fraction(busy)} of the time while {where} idle cores."
                )
            else:  # the count that keeps up needs cores that are not idle: say both
                out.append(
                    f"Raise num_workers from {nw} only as far as the idle cores go: about "
                    f"{need} would keep up, and their {need - nw} more need about "
                    f"{extra:.1f} cores where {where} {idle_cores:.1f} idle. Past that the "
                    "CPU is the limit: make each batch cheaper (crop or resize first, "
                    "transform whole batches) or move augmentation to the GPU."
                )
        else:
            out.append(
                "The CPU is the limit: make each batch cheaper (crop or resize first, "
                "transform whole batches instead of samples, preprocess offline) or move "
                "augmentation to the GPU; more workers would only compete for the same cores."
            )
        # unmeasured, off the CPU on busy cores is taken for a wait for one
        guess = core_wait is None and cpu is not None and cpu >= CPU_BUSY and advised is None
        waited = core_wait if core_wait is not None else (off if guess else 0.0)
        if waited >= (0.5 if guess else 0.2):
            ev.append(
                f"{they(seen, 'waits', 'wait')} for a free core {fraction(waited)} of each "
                "batch's time"
            )
        if blocked >= 0.5 and not guess:
            ev.append(
                f"{they(seen, 'spends', 'spend')} {fraction(blocked)} of each batch off the "
                "CPU, waiting (file reads, sleeps or locks)"
            )
            if advised is None:
                out.append("More workers hide that waiting: while one waits, the others work.")
    elif busy is not None and busy < IDLE_WORKERS:
        size = lp.workers[0].batch_bytes if lp.workers else None
        ev.append(
            f"{they(seen, 'is', 'are')} idle {fraction(1 - busy)} of the time"
            + (f"; a batch is {nbytes(size)}" if size else "")
        )
        make, wait = lp.batch_s, lp.data_s
        if rs is None and size is not None and size < SMALL_BATCH and 0 < (make or 0.0) < wait:
            # small batches whose trip costs more than their making: the trip is per batch
            # (a queue, pickling, a worker woken on a busy host), not per byte
            out.append(
                f"Batches are ready but slow to reach the loop, and small ({nbytes(size)}): "
                f"a worker makes one in {seconds(make)}, the loop waits {seconds(wait)} for "
                "each, the cost of its trip between processes, not of its size. "
                "num_workers=0 (the loop makes its own, no trip) or a larger batch_size "
                "(fewer trips) cuts it."
            )
        elif rs is None:  # else they are idle between epochs, while they start
            out.append(
                "Batches are ready but slow to reach the loop: the cost is in moving them. "
                "Send smaller batches (uint8 images, normalize on the device), use "
                "pin_memory=True with a GPU, and check that /dev/shm is not full."
            )
    if burst:
        out.append(
            "The workers cannot keep up: each makes a whole batch alone, so the loop stalls "
            "once per round of workers. More workers or a cheaper per-sample transform help."
        )
    if rs is not None:
        out.insert(0, RESTART_ADVICE)
    if not out:
        out.append(
            "Make batches cheaper or add workers; the Processes panel shows each worker's CPU."
        )
    return out, advised


def _job_cpu(snap: Snapshot, jc: JobCores) -> tuple[float | None, float | None, str]:
    """The cores the job may use, how busy they are (%) and that as evidence: the host's,
    or where an affinity or a cgroup's limit holds the job, its own (a Slurm step's 2 of
    a node's 16 cores, full, with the node idle, has no idle core for another worker)."""
    host = snap.host
    if jc.quota is not None:
        job = job_cores(snap)
        return (
            jc.quota,
            min(100.0, 100.0 * job / jc.quota),
            f"the job uses {job:.1f} of the {jc.text()}",
        )
    cpu, cores = jc.busy_percent, (jc.usable if jc.cpus is not None else host.cpu_count or None)
    if cpu is None:
        return cores, None, ""
    if jc.cpus is not None:
        return cores, cpu, f"the job may run on {jc.text()}, {cpu:.0f}% busy"
    return cores, cpu, f"host CPU {cpu:.0f}% busy on {count(host.cpu_count, 'core')}"


def _no_core_to_spare(snap: Snapshot, jc: JobCores) -> str:
    """Why a worker process would find no core of its own, as evidence; "" where one
    would: the cores the job may use are ``CPU_BUSY`` busy, and they are one, or other
    processes hold them (cpu-contention's test). There the loop's data wait holds its
    waits for a core, and a worker overlaps nothing it computes (a loop on a crowded host
    read 31% data wait, and was told num_workers=1 overlaps it)."""
    cpu = jc.busy_percent
    if cpu is None or cpu < CPU_BUSY:
        return ""  # a core has time to spare: loading that waits (a file read) or computes
    if jc.usable and jc.usable <= 1:
        return (
            f"the job may use {jc.text()}, {cpu:.0f}% busy: a worker process would take "
            "turns with the loop on it"
        )
    if not any(p.pid == snap.steps.pid and p.cpu_percent is not None for p in snap.processes):
        return ""  # the job's own share is not known
    job = job_cores(snap)
    others = others_cores(snap, jc, job)
    if others is None or not crowded(snap, jc, job):
        return ""
    return (
        f"other processes keep the job's cores busy ({cpu:.0f}% busy on {jc.text()}; they "
        f"use {others:.1f} cores, the job {job:.1f}): a worker process would wait for a "
        "core as the loop does"
    )


def _bursts(lp: Loop, num_workers: int) -> str:
    """Long waits every ~num_workers steps: the signature of workers that cannot keep up."""
    if num_workers < 2:
        return ""
    rows = lp.rows
    med_data = median([r.data for r in rows]) or 0.0
    med_step = median([r.duration for r in rows]) or 0.0
    bar = max(3 * med_data, 0.25 * med_step, 1e-3)
    idx = [i for i, r in enumerate(rows) if r.data > bar]
    if len(idx) < 3:
        return ""
    gap = median([b - a for a, b in zip(idx, idx[1:])]) or 0.0
    long_wait = sum(rows[i].data for i in idx)
    if abs(gap - num_workers) > 1 or long_wait < 0.6 * sum(r.data for r in rows):
        return ""
    wait = median([rows[i].data for i in idx])
    return (
        f"the wait comes in bursts: {seconds(wait)} every ~{gap:.0f} steps ({num_workers} workers)"
    )


def _cores(blocked: float) -> str:
    """What more workers need besides: a core each where a batch is CPU work (or a wait
    for a core), none where the workers wait off the CPU most of each batch for something
    else (reads, sleeps: they overlap)."""
    if blocked >= 0.5:
        return " (they wait off the CPU most of each batch: no core each needed)"
    return ", each with a core of its own"


def they(n: int, one: str, more: str) -> str:
    """The loader's workers as the subject of ``one`` (a verb) or ``more``: "the worker is",
    "the workers are"."""
    return f"the worker {one}" if n == 1 else f"the workers {more}"
