"""``cpu-throttled``: the job's cgroup CPU limit holds training back.

A container's ``--cpus``, a Kubernetes ``limits.cpu`` or a systemd ``CPUQuota`` lets the
job's processes run for ``quota`` of each period together; once they have, the kernel
stops them until the next period, whatever cores are free. torch sizes its thread pool by
the CPUs it may run on, not by the limit, and a DataLoader's workers add to it: the job
spends the limit early in each period and then waits. What proves it is the same figure
as ``cpu-contention``'s (the training thread's run-queue delay: a throttled thread is
runnable, not running) with the job's CPU use at its limit, which that rule then leaves
to this one.
"""

from __future__ import annotations

from perftop.fmt import count
from perftop.hints.base import fraction, threshold
from perftop.hints.contention import WAIT_ENTER, WAIT_STAY, waiting_trainer
from perftop.hints.cores import AT_LIMIT, job_cores
from perftop.model.cores import allowed_cores, whole
from perftop.model.snapshot import Hint, Snapshot


def cpu_throttled(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    jc = allowed_cores(snap)
    quota = jc.quota
    if quota is None:
        return []
    trainer = waiting_trainer(snap)
    if trainer is None or trainer.core_wait_share is None:
        return []
    wait = trainer.core_wait_share
    job = job_cores(snap)
    if wait < threshold("cpu-throttled", active, WAIT_ENTER, WAIT_STAY) or job < AT_LIMIT * quota:
        return []
    threads = next((t.torch_threads for t in snap.trainers if t.pid == trainer.pid), None)
    workers = sum(1 for w in snap.workers if not w.exited and w.ppid == trainer.pid)
    ev = [
        f"the job's cgroup may use {quota:g} cores (its CPU limit: cpu.max, or the CFS quota "
        f"over its period; the host has {count(jc.host, 'core')}), and the job uses {job:.1f}",
        f"the training process (pid {trainer.pid}) waited to run {fraction(wait)} of the "
        "time, held until the next period (its training thread's run-queue delay)",
    ]
    if threads is not None:
        ev.append(
            f"it runs {count(threads, 'torch thread')}"
            + (f" and {count(workers, 'DataLoader worker')}" if workers else "")
            + " within that limit"
        )
    fit = whole(quota)
    return [
        Hint(
            id="cpu-throttled",
            severity="high" if wait >= 0.3 else "medium",
            title=f"CPU limit: the job's cgroup allows {quota:g} cores, training waits "
            f"{fraction(wait)} of the time",
            evidence=tuple(ev),
            advice=(
                "Raise the limit: Kubernetes' resources.limits.cpu, docker run --cpus, "
                "Slurm's --cpus-per-task, systemd's CPUQuota.",
                f"Or fit the job to it: torch.set_num_threads({fit})"
                + (f" and num_workers at most {max(0, fit - 1)}" if workers else "")
                + ", so its threads do not spend the period's share at once and then stop.",
            ),
            est_gain=wait,
            est_gain_text=f"up to {fraction(wait)} of step time: the training thread's wait to run",
            panel="host",
        )
    ]
