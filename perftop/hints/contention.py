"""``cpu-contention``: the training loop waits for a core that other work on the host holds.

On a shared machine another user's job (or a forgotten one of the user's) can take the
cores the training process needs: its steps slow down and nothing of the job's own says
why (no data wait, no sync; the CPU share just drops). What proves it is the kernel's
run-queue delay of the training process's training thread (``ProcRow.core_wait_share``: the
share of wall time it was runnable with no core free), beside the host's busy cores less
the job's and perftop's own. Where the job's own threads are more than the cores, that is
``cpu-oversubscribed`` (memory.py), not this.
"""

from __future__ import annotations

from perftop.fmt import count, cpu_list
from perftop.hints.base import fraction, threshold
from perftop.hints.cores import crowded, job_cores, others_cores
from perftop.model.cores import JobCores, allowed_cores
from perftop.model.snapshot import Hint, ProcRow, Snapshot

WAIT_ENTER, WAIT_STAY = 0.10, 0.07  # the training thread's share of time waiting for a core
HOST_BUSY = 75.0  # host CPU %, at least (a wait for a core on an idle host is not this)


def cpu_contention(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    h = snap.host
    jc = allowed_cores(snap)
    cpu = jc.busy_percent  # of the CPUs the job may run on: its affinity's, or the host's
    if not h.cpu_count or cpu is None or cpu < HOST_BUSY or jc.quota is not None:
        return []  # (a cgroup's CPU limit that holds the job back: cpu-throttled's case)
    trainer = waiting_trainer(snap)
    if trainer is None or trainer.core_wait_share is None:
        return []
    wait = trainer.core_wait_share
    if wait < threshold("cpu-contention", active, WAIT_ENTER, WAIT_STAY):
        return []
    job = job_cores(snap)
    others = others_cores(snap, jc, job)
    if others is None or not crowded(snap, jc, job):
        return []  # the job fills the cores itself (cpu-oversubscribed's case)
    mon = snap.meta.monitor_cpu_percent  # None: not said (an older recording)
    where = (
        f"the host CPU is {cpu:.0f}% busy on {count(h.cpu_count, 'core')}"
        if jc.cpus is None
        else f"the {count(len(jc.cpus), 'CPU')} the job may run on ({cpu_list_text(jc)}, its "
        f"CPU affinity; the host has {h.cpu_count}) are {cpu:.0f}% busy"
    )
    ev = [
        f"the training process (pid {trainer.pid}) waited for a core {fraction(wait)} of the "
        "time: runnable, with no core free (its training thread's run-queue delay)",
        f"{where}: other processes use {others:.1f} cores, the job {job:.1f}"
        + (f", perftop {mon / 100.0:.2f}" if mon is not None else ""),
    ]
    if h.load is not None:
        ev.append(f"load average {h.load[0]:.1f} on {count(h.cpu_count, 'core')}")
    pinned = jc.cpus is not None
    return [
        Hint(
            id="cpu-contention",
            severity="high" if wait >= 0.3 else "medium",
            title=f"CPU contention: other processes hold the cores, training waits "
            f"{fraction(wait)} of the time",
            evidence=tuple(ev),
            advice=(
                f"Give the job CPUs no other process runs on (its affinity allows only "
                f"{cpu_list_text(jc)}: taskset -c, a cgroup cpuset, Slurm's --cpu-bind), or move "
                "the others off them."
                if pinned
                else "Run where cores are free (another node; Slurm's --exclusive), or reserve "
                "cores for this job (a cgroup cpuset; taskset for it and for the others).",
                "If the other processes are yours, lower their priority (renice +10 PID) or "
                "stop them while this job runs.",
            ),
            est_gain=wait,
            est_gain_text=f"up to {fraction(wait)} of step time: the training thread's wait "
            "for a core",
            panel="host",
        )
    ]


def cpu_list_text(jc: JobCores) -> str:
    """The job's CPUs as the kernel lists them ("0-3,8")."""
    return cpu_list(jc.cpus or ())


def waiting_trainer(snap: Snapshot) -> ProcRow | None:
    """The live training process that waits for a core the most."""
    pids = {t.pid for t in snap.trainers}
    rows = [
        p for p in snap.processes if p.alive and p.pid in pids and p.core_wait_share is not None
    ]
    return max(rows, key=lambda p: p.core_wait_share or 0.0, default=None)
