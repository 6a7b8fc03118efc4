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
import sys
from dataclasses import replace

from perftop.model.snapshot import HostRow, ProcRow
from tests.helpers import WORKLOADS, perftop, run_and_report, spinning
from tests.test_hints_rules_more import PID, fires, snap


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
