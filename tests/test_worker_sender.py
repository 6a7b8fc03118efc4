"""A DataLoader worker sends its reports from its own thread: no thread of perftop's wakes
in it (each would take ~0.1 ms of CPU 4x a second from every worker of the job), and every
report still arrives, the last one with the worker's whole count."""

from __future__ import annotations

import json
import sys

from perftop.events import WorkerStats
from perftop.recording import read_events
from tests.helpers import WORKLOADS, run_and_report


def test_workers_run_no_sender_thread_and_their_reports_all_arrive(tmp_path):
    proc, report = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "worker_threads.py"))
    assert proc.returncode == 0, proc.stderr
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "perftop-sender" not in own["threads"], own  # the worker's own threads only
    made = {int(pid): n for pid, n in own["batches"].items()}
    assert len(made) == 2 and sum(made.values()) == 50
    stats: dict[int, list[WorkerStats]] = {}
    for ev in read_events(tmp_path / "r.perftop"):
        if isinstance(ev, WorkerStats):
            stats.setdefault(ev.pid, []).append(ev)
    assert set(stats) == set(made)
    for pid, evs in stats.items():
        # ~1 s of batches, a report every 0.5 s as it makes them, the last at its exit
        assert len(evs) >= 3, [(e.t, e.batches) for e in evs]
        assert evs[-1].final and evs[-1].batches == made[pid], (evs[-1], made)
        assert [e.batches for e in evs] == sorted(e.batches for e in evs)
    assert report["dropped_events"] == 0 and report["steps"]["count"] == 50
