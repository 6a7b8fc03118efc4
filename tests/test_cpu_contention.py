"""``cpu-contention``: a training loop that waits for cores other processes hold.

A real job (tests/workloads/cpu_bound_steps.py: steps that only compute, one thread, on
one core) on a host whose cores other processes keep busy, one of them at the job's
priority on the job's core, as another user's job would: the hint fires, and the
trainer's share of time waiting for a core (its main thread's run-queue delay, read by
the process probe) agrees with the job's own clocks (wall time less its thread's CPU
time: a loop that never blocks is off the CPU only while it waits for a core). The rule's bars on snapshots a real run gives (the same thresholds
with and without the hint shown)."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import replace

import pytest

from perftop.events.probes import HostSample
from perftop.hints import evaluate
from perftop.hints.cores import job_cores
from perftop.hints.verdict import whole_run_view
from perftop.model.cores import allowed_cores
from perftop.model.resources import HostReducer
from perftop.model.snapshot import HostRow, ProcRow
from perftop.report.build import session_from_file
from tests.helpers import WORKLOADS, perftop, run_and_report, spinning
from tests.test_hints_rules_more import PID, T0, fires, snap


def test_a_job_waiting_for_cores_others_hold(tmp_path) -> None:
    mine = min(os.sched_getaffinity(0))  # the job's core, shared with one spinner
    rest = sorted(os.sched_getaffinity(0) - {mine})
    # at the job's priority on the job's core (the job waits for it), at nice 19 on the
    # others (they take only idle cycles: the host is full without holding up the suite)
    with spinning((str(mine), 0), *((str(c), 19) for c in rest)):
        proc, rep = run_and_report(
            tmp_path, sys.executable, str(WORKLOADS / "cpu_bound_steps.py"), "4", str(mine)
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = json.loads(proc.stdout.splitlines()[-1])
    assert rep["steps"]["count"] == own["steps"] > 10
    waited = 1.0 - own["cpu_s"] / own["wall_s"]  # the loop's own figure
    main = next(p for p in rep["processes"] if p["role"] == "main")
    share = main["core_wait_share_avg"]
    # over the process's life as the probe saw it (its imports too, as contended)
    assert share is not None and abs(share - waited) <= 0.15, (share, waited)
    assert waited >= 0.2, waited  # the premise: the host's cores were held by the others
    hint = next(h for h in rep["hints"] if h["id"] == "cpu-contention")
    # (the hint as shown live: its share over the latest 10 s)
    assert hint["panel"] == "host" and abs(hint["est_gain"] - share) <= 0.15, hint
    assert f"(pid {main['pid']}) waited for a core" in hint["evidence"][0], hint
    assert hint["est_gain_text"].startswith("up to ") and "of step time" in hint["est_gain_text"]
    assert "other processes use" in hint["evidence"][1], hint
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    head = next(ln for ln in text.splitlines() if ln.lstrip().startswith("pid ") and "role" in ln)
    row = next(ln for ln in text.splitlines() if ln.lstrip().startswith(f"{main['pid']} "))
    assert "core wait" in head and f"{100 * share:.0f}%" in row, (head, row)


@pytest.mark.parametrize("pinned", [False, True], ids=["any_core", "pinned"])
def test_the_jobs_own_processes_are_not_other_processes(tmp_path, pinned: bool) -> None:
    """The job starts two processes of its own that spin while it trains (as Ray's env
    runners and actors do): three busy processes on two cores, the trainer waits for a core
    a third of the time, and what holds the cores is the job's. The whole-run verdict
    counted only the trainers and the loaders' workers as the job (everything else had
    exited by the end), beside the host's average, which holds them all: "CPU contention:
    other processes hold the cores, training waits 30% of the time ... other processes use
    1.0 cores, the job 0.7" (RLlib's APPO: "other processes use 0.8 cores, the job 0.9",
    the 0.8 its own env runners). The verdict's job now holds every process of the job at
    its share of the run, against the job's own clocks (the helpers' rusage); a
    cpu-contention hint said only by the verdict (other tests' jobs may hold the cores on a
    busy host) gives that figure. Pinned to one core with one helper, the verdict read that
    core's busy share from the last probe sample (taken as the job ended: idle), not the
    run's average: at least the job's own CPU time there."""
    core = str(min(os.sched_getaffinity(0))) if pinned else "any"
    proc, rep = run_and_report(
        tmp_path, sys.executable, str(WORKLOADS / "cpu_bound_steps.py"), "4", core,
        "1" if pinned else "2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = json.loads(proc.stdout.splitlines()[-1])
    # the premise: they held the cores while the loop ran, at least half as much as the
    # loop did (not against a clock: on a host loaded by other jobs, four test processes on
    # two cores, the loop and its pinned helper each had 0.29 s of CPU in its 4 s)
    assert own["helpers_cpu_s"] >= 0.5 * own["cpu_s"] > 0, own
    helpers = own["helpers_cpu_s"] / rep["duration_s"]  # their cores over the run
    snap = session_from_file(str(tmp_path / "r.perftop")).snapshot(window=None)
    view = whole_run_view(snap)  # what the verdict reads
    main = next(p for p in view.processes if p.pid == rep["steps"]["pid"])
    job = job_cores(view)
    trainer = (main.cpu_percent or 0.0) / 100.0
    # at least their time less a probe interval at each of their ends (a few samples: the
    # loop's 4 s), at most their time as the probe's samples round it
    assert trainer + 0.4 * helpers <= job <= trainer + 1.4 * helpers + 0.1, (job, trainer)
    if pinned:  # the core's busy share over the run: at least the job's own time on it
        busy = allowed_cores(view).busy_percent or 0.0
        assert busy >= 80.0 * (own["cpu_s"] + own["helpers_cpu_s"]) / rep["duration_s"], busy
    for h in rep["hints"]:
        if h["id"] == "cpu-contention" and not h["seen_live"]:
            said = re.search(r"the job (\d+\.\d)", h["evidence"][1])
            assert said and abs(float(said.group(1)) - job) <= 0.051, (h, job)


def _contended(wait: float, cpu: float = 100.0, job: float = 50.0, mon: float = 3.0):
    """Two cores at ``cpu``% busy; the trainer at ``job``% of a core, waiting ``wait`` of
    the time; perftop at ``mon``%."""
    procs = (ProcRow(PID, 1, cpu_percent=job, core_wait_share=wait),)
    s = snap(0.0, host=HostRow(cpu_count=2, cpu_percent=cpu, load=(3.1, 2.0, 1.5)), procs=procs)
    return replace(s, meta=replace(s.meta, monitor_cpu_percent=mon))


def test_cpu_contention_bars() -> None:
    assert fires("cpu-contention", _contended(0.10))
    assert not fires("cpu-contention", _contended(0.09))
    assert fires("cpu-contention", _contended(0.07), shown=True)  # stays on its looser bar
    assert not fires("cpu-contention", _contended(0.06), shown=True)
    assert not fires("cpu-contention", _contended(0.5, cpu=70.0))  # the host not busy
    # the job fills the cores itself (1.5 of 2: cpu-oversubscribed's case), and others
    # hold under half a core
    assert not fires("cpu-contention", _contended(0.5, job=150.0))
    assert not fires("cpu-contention", _contended(0.5, cpu=76.0, job=110.0))
    # no figure (a kernel without run-queue delays, an older recording): nothing
    unread = replace(_contended(0.5), processes=(ProcRow(PID, 1, cpu_percent=50.0),))
    assert not fires("cpu-contention", unread)


def test_the_verdict_reads_a_pinned_jobs_cores_over_the_run() -> None:
    """A job pinned to core 0 of 2, which its processes held the whole run, then exited:
    the last probe sample (taken as it ended) finds the core idle. The whole-run verdict
    read that sample's per-core figures for the job's CPUs, against every other figure's
    run average; it reads each core's average over the run."""
    host = HostReducer()
    for i, core0 in enumerate([100.0] * 9 + [3.0]):  # a sample a second, 2 cores
        host.apply(HostSample(
            T0 + i, 1.0, 2, (core0 + 2.0) / 2, (core0, 2.0), 0.0, (1.2, 1.0, 0.8),
            8 << 30, 2 << 30, 6 << 30, 0, 0, 0, 0, None, 0, 0,
        ))  # fmt: skip
    assert host.row.per_core == (3.0, 2.0) and host.row.per_core_avg == (90.3, 2.0)
    procs = (ProcRow(PID, 1, cpu_percent=2.0, cpu_percent_avg=50.0, cpu_samples=10, cpus="0"),)
    s = snap(0.0, host=host.row, procs=procs)
    assert allowed_cores(s).busy_percent == 3.0  # live: the latest sample's
    assert allowed_cores(whole_run_view(s)).busy_percent == 90.3


def test_the_verdict_reads_perftops_own_cpu_over_the_run() -> None:
    """perftop's last CPU reading is of the end's own work (the whole run's figures): the
    whole-run verdict, which reads the host's CPU over the run, takes perftop's out of it
    over the run too (it took the last reading from the run's average)."""
    s = _contended(0.5, mon=18.0)
    s = replace(s, meta=replace(s.meta, monitor_cpu_avg=6.0))
    assert whole_run_view(s).meta.monitor_cpu_percent == 6.0
    h = evaluate(whole_run_view(s))[0]["cpu-contention"]
    assert h.evidence[1].endswith("the job 0.5, perftop 0.06"), h.evidence
    old = replace(s, meta=replace(s.meta, monitor_cpu_avg=None))  # an older recording
    assert whole_run_view(old).meta.monitor_cpu_percent == 18.0
