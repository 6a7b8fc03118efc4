"""The cores a job may use, not the host's: its CPU affinity (taskset, a Slurm step's or a
container's cpuset) and its cgroup's CPU limit (``docker --cpus``, Kubernetes'
``limits.cpu``). Real jobs pinned with ``taskset`` and put in a real cgroup with a CPU
limit: the probe reads both, and the CPU hints weigh the job's threads and waits against
them (``cpu-oversubscribed`` on the job's one core of an otherwise idle host,
``cpu-throttled`` where the limit holds it back, not ``cpu-contention``). The rules' bars
on snapshots with the figures those runs give."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from perftop.fmt import cpu_list
from perftop.hints import evaluate
from perftop.hints.cores import JOB_SHARE, crowded, job_cores
from perftop.model.cores import allowed_cores, cpu_set
from perftop.model.snapshot import HostRow, ProcRow, Snapshot
from perftop.probes.cpulimit import read_affinity, read_cpu_quota
from tests.helpers import WORKLOADS, new_cgroup, run_and_report
from tests.test_hints_rules_more import PID, fires, snap


def test_cpu_lists_read_as_the_kernel_writes_them() -> None:
    assert cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert cpu_set("0-3,8,10-11") == frozenset({0, 1, 2, 3, 8, 10, 11})
    assert cpu_set(cpu_list(range(128))) == frozenset(range(128))
    for bad in ("", None, "x", "3-1", "-1", "0-99999999"):
        assert cpu_set(bad) == frozenset(), bad
    assert read_affinity(os.getpid()) == cpu_list(os.sched_getaffinity(0))
    assert read_affinity(2**22 + 7) is None  # no such process


def _pinned(cpus: str, per_core: tuple[float, ...], cpu: float, wait: float | None = None):
    """A trainer at ``cpu``% with 2 torch threads, its affinity ``cpus``, on a host of
    ``len(per_core)`` cores."""
    host = HostRow(cpu_count=len(per_core), cpu_percent=sum(per_core) / len(per_core),
                   per_core=per_core)  # fmt: skip
    procs = (ProcRow(PID, 1, cpu_percent=cpu, cpus=cpus, core_wait_share=wait),)
    return snap(0.0, nw=0, host=host, procs=procs, threads=2)


def test_threads_are_weighed_against_the_cores_the_job_may_use() -> None:
    idle = (100.0,) + (3.0,) * 15  # its one core full, the other 15 idle: the host 9% busy
    one = _pinned("0", idle, 99.0)
    jc = allowed_cores(one)
    assert (jc.usable, jc.cpus, jc.busy_percent) == (1.0, frozenset({0}), 100.0)
    assert fires("cpu-oversubscribed", one)
    assert not fires("cpu-oversubscribed", _pinned("0-15", idle, 99.0))  # all 16: no crowd
    assert not fires("cpu-oversubscribed", _pinned("0-1", idle, 99.0))  # 2 threads, 2 cores
    # another user's process on the job's core: the job waits for it (its core 100% busy,
    # the host 9%); where its affinity is not known, the host's figures say nothing
    shared = _pinned("0", idle, 50.0, wait=0.45)
    assert fires("cpu-contention", shared)
    assert not fires("cpu-contention", replace(shared, processes=(
        ProcRow(PID, 1, cpu_percent=50.0, core_wait_share=0.45),)))  # fmt: skip


def test_on_full_cores_the_crowd_or_the_jobs_threads_are_named() -> None:
    """A job pinned to one core, its 2 torch threads at 69% of it (under the 70% that
    calls a core the job's own), waiting 45% of the time; the core 95% busy, perftop at 5%:
    others hold 0.21 of it (under the 0.3 that calls it theirs). Neither rule spoke (a
    loaded CI run's whole-run verdict): the crowd is not others', so it is the job's
    threads'. Beside others that do hold the core, contention, as before."""
    core = (95.0, 3.0)
    job = _pinned("0", core, 69.0, wait=0.45)
    job = replace(job, meta=replace(job.meta, monitor_cpu_percent=5.0))
    assert fires("cpu-oversubscribed", job) and not fires("cpu-contention", job)
    crowd = _pinned("0", core, 55.0, wait=0.45)  # others 0.35 of the core
    crowd = replace(crowd, meta=replace(crowd.meta, monitor_cpu_percent=5.0))
    assert fires("cpu-contention", crowd) and not fires("cpu-oversubscribed", crowd)


def test_workers_on_a_full_core_the_job_holds_are_too_many() -> None:
    """Two workers and their trainer pinned to one core, 95% busy; the job at 69% of it,
    perftop at 5%, others at 0.21 (not theirs by contention's measure): the job's own
    workers crowd it, so too-many-workers names them (it asked the job for 70%, as
    cpu-oversubscribed did, and said nothing). Beside others that hold the core, nothing."""

    def pinned(main: float, each: float) -> Snapshot:
        host = HostRow(cpu_count=2, cpu_percent=49.0, per_core=(95.0, 3.0))
        procs = (ProcRow(PID, 1, cpu_percent=main, cpus="0"),) + tuple(
            ProcRow(PID + 1 + i, PID, cpu_percent=each, cpus="0") for i in range(2)
        )
        s = snap(0.0, nw=2, busy=0.9, host=host, procs=procs)
        return replace(s, meta=replace(s.meta, monitor_cpu_percent=5.0))

    own = pinned(41.0, 14.0)
    assert not crowded(own, allowed_cores(own), 0.69)
    h = evaluate(own)[0]["too-many-workers"]
    assert h.evidence[0].startswith("2 workers on 1 of 2 cores") and "95% busy" in h.evidence[0]
    assert h.advice[0].startswith("Use at most 1 worker:"), h.advice
    assert not fires("too-many-workers", pinned(27.0, 14.0))  # others 0.35 of the core


def test_the_jobs_cores_are_at_most_those_it_may_use() -> None:
    """A trainer and two workers pinned to one core, at averages over their own lives that
    sum to 1.2 (the whole-run verdict's): the job uses at most its one core, not "1.2
    cores" of it."""
    host = HostRow(cpu_count=2, cpu_percent=52.0, per_core=(100.0, 4.0))
    procs = (ProcRow(PID, 1, cpu_percent=40.0, cpus="0"),) + tuple(
        ProcRow(PID + 1 + i, PID, cpu_percent=40.0, cpus="0") for i in range(2)
    )
    s = snap(0.0, nw=2, busy=0.9, host=host, procs=procs)
    assert job_cores(s) == 1.0
    h = evaluate(s)[0]["too-many-workers"]
    assert "the job uses 1.0 cores" in h.evidence[0], h.evidence
    free = snap(0.0, nw=2, busy=0.9, host=replace(host, per_core=(60.0, 44.0)),
                procs=tuple(replace(p, cpus=None) for p in procs))  # fmt: skip
    assert job_cores(free) == 1.2  # on the host's 2 cores: as measured


def test_input_bound_promises_no_worker_a_core_where_none_is_free() -> None:
    """A loop that loads its own batches (num_workers=0), waiting 55% of a step: on an
    idle host of 2 cores, or on its one core while that is mostly idle, one worker and its
    gain; on the one core the job may use, full, or on cores others hold, a worker would
    take turns with them, so no count's gain is claimed
    (a loop on a crowded host was told "num_workers=1 overlaps loading")."""

    def loop(per_core: tuple[float, ...], cpus: str | None, cpu: float) -> Snapshot:
        host = HostRow(cpu_count=2, cpu_percent=sum(per_core) / 2, per_core=per_core)
        procs = (ProcRow(PID, 1, cpu_percent=cpu, cpus=cpus, core_wait_share=0.3),)
        s = snap(0.06, nw=0, host=host, procs=procs)
        return replace(s, meta=replace(s.meta, monitor_cpu_percent=3.0))

    free = evaluate(loop((45.0, 5.0), None, 48.0))[0]["input-bound"]
    assert free.advice == (
        "Load batches in background processes: DataLoader(..., num_workers=1) overlaps "
        "loading with the training step.",
    )
    assert "with num_workers=1" in free.est_gain_text
    one = evaluate(loop((98.0, 5.0), "0", 48.0))[0]["input-bound"]
    held = evaluate(loop((100.0, 100.0), None, 48.0))[0]["input-bound"]
    assert "the job may use 1 of 2 cores (its CPU affinity), 98% busy: a worker process " \
        "would take turns with the loop on it" in one.evidence, one.evidence  # fmt: skip
    # its one core mostly idle (the loading waits, a file read): a worker overlaps that
    assert evaluate(loop((30.0, 5.0), "0", 28.0))[0]["input-bound"].advice == free.advice
    assert any(e.startswith("other processes keep the job's cores busy (100% busy on 2 "
                            "cores; they use 1.5 cores, the job 0.5)") for e in held.evidence)  # fmt: skip
    for h in (one, held):
        assert h.advice[0].startswith("Where a core is free, DataLoader(..., num_workers=1)")
        assert "if every batch were ready" in h.est_gain_text, h.est_gain_text
        assert h.est_gain == round(0.06 / 0.11, 4), h.est_gain  # the whole data wait
    assert free.est_gain == round(1 - 0.06 / 0.11, 4)  # a step at least the worker's batch


def test_busy_workers_are_weighed_against_the_jobs_cores_not_the_hosts() -> None:
    """Two workers busy 95% of the time, on the CPU 95% of it, and a loop that waits 37%
    of a step for them: on an idle host of 16 cores, more workers; pinned to 2 of them
    (a Slurm step's, full) or held to 2 by its cgroup's limit (the host idle either way),
    no idle core for one more: the CPU is the limit (it read the host's 15% and said
    "raise num_workers ... while the host has idle cores")."""

    def job(cpus: str | None, quota: float | None) -> Snapshot:
        per_core = (100.0, 100.0) + (5.0,) * 14
        host = HostRow(cpu_count=16, cpu_percent=17.0, per_core=per_core)
        procs = (ProcRow(PID, 1, cpu_percent=30.0, cpus=cpus, cpu_quota=quota),) + tuple(
            ProcRow(PID + 1 + i, PID, cpu_percent=90.0, cpus=cpus, cpu_quota=quota)
            for i in range(2)
        )
        return snap(0.03, nw=2, busy=0.95, cpu=0.95, host=host, procs=procs)

    free = evaluate(job(None, None))[0]["input-bound"]
    assert any(a.startswith("Raise num_workers from 2 to about ") for a in free.advice)
    assert "host CPU 17% busy on 16 cores" in free.evidence, free.evidence
    pinned = evaluate(job("0-1", None))[0]["input-bound"]
    limited = evaluate(job(None, 2.0))[0]["input-bound"]
    assert "the job may run on 2 of 16 cores (its CPU affinity), 100% busy" in pinned.evidence
    assert "the job uses 2.0 of the 2 cores (its cgroup's CPU limit; the host has 16)" \
        in limited.evidence, limited.evidence  # (2.1 measured: at most 2)  # fmt: skip
    for h in (pinned, limited):
        assert h.advice[0].startswith("The CPU is the limit: make each batch cheaper"), h.advice
        assert "if every batch were ready" in h.est_gain_text


def test_oversubscribed_advice_on_fewer_cores_than_busy_workers() -> None:
    """A trainer of one torch thread and its 2 busy workers on one core: its advice said
    set_num_threads(1) "leaves a core to each busy worker", with no core to leave; and
    "1 torch threads"."""

    def job(cpus: str) -> Snapshot:
        host = HostRow(cpu_count=4, cpu_percent=27.0, per_core=(100.0, 3.0, 3.0, 3.0))
        procs = (ProcRow(PID, 1, cpu_percent=52.0, cpus=cpus),) + tuple(
            ProcRow(PID + 1 + i, PID, cpu_percent=24.0, cpus=cpus) for i in range(2)
        )
        return snap(0.0, nw=2, busy=0.9, host=host, procs=procs, threads=1)

    h = evaluate(job("0"))[0]["cpu-oversubscribed"]
    assert h.evidence[0].startswith("the job runs 3 busy compute threads on 1 of 4 cores (its "
                                    "CPU affinity): 1 torch thread in the training process and "
                                    "2 busy DataLoader workers (2 threads)"), h.evidence  # fmt: skip
    assert h.advice[0] == (
        "torch.set_num_threads(1) in the training process; the 2 busy workers still take "
        "turns with it on 1 core: fewer workers, or more cores for the job."
    )


def _limited(quota: float | None, wait: float, cpu: float = 49.0):
    procs = (ProcRow(PID, 1, cpu_percent=cpu, cpu_quota=quota, core_wait_share=wait),)
    return snap(0.0, nw=0, host=HostRow(cpu_count=2, cpu_percent=80.0), procs=procs)


def test_a_cgroup_limit_is_its_own_hint() -> None:
    assert fires("cpu-throttled", _limited(0.5, 0.4))
    assert not fires("cpu-contention", _limited(0.5, 0.4))  # the limit, not other users
    assert not fires("cpu-throttled", _limited(0.5, 0.4, cpu=30.0))  # under its limit
    assert not fires("cpu-throttled", _limited(None, 0.4))
    assert not fires("cpu-throttled", _limited(4.0, 0.4))  # over the host's 2: no limit
    assert allowed_cores(_limited(4.0, 0.4)).quota is None


def _job(tmp_path: Path, *cmd: str) -> tuple[dict, dict]:
    proc, rep = run_and_report(tmp_path, *cmd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1]), rep


def _main(rep: dict) -> dict:
    return next(p for p in rep["processes"] if p["role"] == "main")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not shutil.which("taskset"),
                    reason="needs 2 CPUs and taskset")  # fmt: skip
def test_two_threads_pinned_to_one_core_of_two(tmp_path) -> None:
    """The job's 2 torch threads on the one CPU taskset gives it: oversubscribed, though
    the host is half idle (its other core). On a host that other processes fill (a loaded
    CI run: load 3.9 on 2 cores once, the job at 55% of its core) that core is theirs as
    much as the job's, and the rules say so (cpu-contention; the oversubscribed job only
    where it was seen filling its core live): then the job runs again, up to three times,
    for a run where it filled its core (the rule itself on snapshots:
    test_threads_are_weighed_against_the_cores_the_job_may_use)."""
    core = str(max(os.sched_getaffinity(0)))
    for attempt in range(3):
        where = tmp_path / str(attempt)
        where.mkdir()
        own, rep = _job(where, "taskset", "-c", core, sys.executable,
                        str(WORKLOADS / "threaded_steps.py"), "5", "2")  # fmt: skip
        assert own["threads"] == 2 and rep["steps"]["count"] == own["steps"] > 10
        main = _main(rep)
        assert main["cpus"] == core and main["cpu_quota"] is None
        ids = [h["id"] for h in rep["hints"]]
        if main["cpu_percent_avg"] < 100.0 * JOB_SHARE:
            # others held much of the job's core: a hint names the crowd (theirs; or the
            # job's threads, seen live while it had the core to itself)
            assert {"cpu-contention", "cpu-oversubscribed"} & set(ids), ids
            continue
        break
    else:
        return  # in every run others shared its core, and the rules said so each time
    hint = next(h for h in rep["hints"] if h["id"] == "cpu-oversubscribed")
    assert (
        f"2 busy compute threads on 1 of {os.cpu_count()} cores (its CPU affinity)"
        in (hint["evidence"][0])
    ), hint
    assert "the CPUs the job may run on are" in hint["evidence"][1], hint
    assert "torch.set_num_threads(1)" in hint["advice"][0], hint


def cpu_limited(cores: float) -> contextlib.AbstractContextManager[Path]:
    """A new cgroup whose processes may use ``cores`` together (v2 ``cpu.max``, or v1's
    CFS quota), removed after; skips where this machine lets no one make one."""
    period = 100_000
    quota = str(int(cores * period))
    return new_cgroup("cpu", ("cpu,cpuacct", "cpu"), {"cpu.max": f"{quota} {period}"},
                      {"cpu.cfs_period_us": str(period), "cpu.cfs_quota_us": quota})  # fmt: skip


def test_a_job_held_back_by_its_cgroup_cpu_limit(tmp_path) -> None:
    """One thread under a limit of half a core, on an idle host: it waits half the time
    to run, and the hint says the limit, not other users."""
    with cpu_limited(0.5) as cg:
        job = (
            f"echo $$ > {cg}/cgroup.procs && exec {sys.executable} {WORKLOADS}/cpu_bound_steps.py 5"
        )
        assert read_cpu_quota(os.getpid()) != 0.5
        own, rep = _job(tmp_path, "sh", "-c", job)
    assert rep["steps"]["count"] == own["steps"] > 10
    waited = 1.0 - own["cpu_s"] / own["wall_s"]
    assert 0.3 <= waited <= 0.7, own  # the premise: held to half a core
    main = _main(rep)
    assert main["cpu_quota"] == 0.5, main
    ids = {h["id"] for h in rep["hints"]}
    assert "cpu-contention" not in ids, rep["hints"]
    hint = next(h for h in rep["hints"] if h["id"] == "cpu-throttled")
    assert hint["evidence"][0].startswith("the job's cgroup may use 0.5 cores"), hint
    assert abs(hint["est_gain"] - waited) <= 0.15, (hint, waited)
    assert "torch.set_num_threads(1)" in hint["advice"][1], hint
