"""DataLoader workers of every epoch are workers: with non-persistent workers each epoch starts
new processes, and the loader's report names only the newest; the workers' own reports keep
the earlier ones workers (they showed as ``other``)."""

from __future__ import annotations

import sys
from pathlib import Path

from perftop.report.text import render
from tests.helpers import WORKLOADS, run_and_report


def test_workers_of_earlier_epochs_keep_their_role(tmp_path: Path) -> None:
    proc, report = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "epochs_train.py"),
                                  "3", "10")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    roles = [(p["role"], p["worker_id"]) for p in report["processes"]]
    workers = [w for role, w in roles if role == "worker"]
    assert sorted(workers) == [0, 0, 0, 1, 1, 1], roles  # 2 workers x 3 epochs
    assert [r for r, _ in roles].count("main") == 1 and "other" not in [r for r, _ in roles]
    # every epoch's workers keep their loader (only the newest iterator's were named)
    loaders = {p["loader_id"] for p in report["processes"] if p["role"] == "worker"}
    assert None not in loaders and len(loaders) == 1, report["processes"]
    # which loader trains and which evaluates: autograd at each one's first batch
    grad = {ld["loader_id"]: (ld["num_workers"], ld["grad_enabled"]) for ld in report["loaders"]}
    assert sorted(grad.values()) == [(0, False), (2, True)], report["loaders"]
    text = render(report)  # the text report, from the same JSON
    table = text[text.index("DataLoaders") :].splitlines()[1:4]
    assert table[0].split()[:4] == ["pid", "loader", "dataset", "grad"], table
    assert sorted(r.split()[1:4:2] for r in table[1:]) == [["L0", "on"], ["L1", "off"]], table


def test_a_worker_of_a_second_loader_is_named_with_its_loader_in_the_report() -> None:
    from perftop.report.text_probes import processes_table

    row = dict.fromkeys(("rank", "cmdline", "name"), None)
    rows = [
        {**row, "pid": 11, "role": "worker", "worker_id": 0, "loader_id": 0},
        {**row, "pid": 12, "role": "worker", "worker_id": 1, "loader_id": 1},
        {**row, "pid": 10, "role": "main", "worker_id": None, "loader_id": None},
    ]
    lines = processes_table(rows).splitlines()  # (no figures: a line below says why)
    worker = lines[0].split().index("worker")
    assert [ln.split()[worker] for ln in lines[1:4]] == ["0", "1·L1", "-"], lines


def test_workers_that_exited_a_while_ago_leave_the_live_view(tmp_path: Path) -> None:
    """An evaluation loader made anew for each evaluation (the HF Trainer's) has workers of
    its own each time, and each loader kept its workers' roles: every evaluation added two
    rows of N/A to the Processes panel for the rest of the run (and "+N workers" to the
    header). In a live snapshot (the TUI's, a replay's) a worker whose last report (its
    exit) is over ``GONE_SHOWN_S`` old has no role; the whole run's keeps them all."""
    from perftop.events import ProcSample, WorkerStats
    from perftop.model import Session
    from perftop.model.workers import GONE_SHOWN_S
    from perftop.recording import read_events

    proc, report = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "epochs_train.py"),
                                  "5", "160", "fresh-eval")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = list(read_events(tmp_path / "r.perftop"))
    last = {ev.pid: ev for ev in events if isinstance(ev, WorkerStats)}
    assert len(last) == 20 and all(w.final for w in last.values()), last  # 4 an epoch, 5 epochs
    # Gone 5 s after its exit, as the workers' reports or the probe's last sight of it
    # (a tick, or more on a loaded host, before) have it: 2 s either side are left open.
    end = max(w.t for w in last.values())
    old = {pid for pid, w in last.items() if w.t < end - GONE_SHOWN_S - 2.0}
    recent = {pid for pid, w in last.items() if w.t > end - GONE_SHOWN_S + 2.0}
    assert old and recent, (end, sorted((w.t, w.pid) for w in last.values()))
    # The live view a second after the last worker's exit, by the probe's clock too (the
    # main process lives on after the last evaluation, longer on a busy host, and by the end
    # of the recording the last workers are long gone as well)
    cut = next((i for i, ev in enumerate(events)
                if isinstance(ev, ProcSample) and ev.t > end + 1.0), len(events))  # fmt: skip
    seen: dict[int, float] = {}  # each process's last sighting by the probe
    live_t = 0.0  # the probe's last tick that saw a process of the job
    for ev in events[:cut]:
        if isinstance(ev, ProcSample) and ev.rows:
            live_t = ev.t
            seen.update((row[0], ev.t) for row in ev.rows)
    shown = {pid for pid in recent if seen.get(pid, live_t) > live_t - GONE_SHOWN_S + 2.0}
    assert shown, (live_t, sorted((t, pid) for pid, t in seen.items()))
    s = Session()
    s.apply_all(events[:cut])
    live = {r.pid for r in s.snapshot().roles if r.role == "worker"}
    assert not live & old and shown <= live, (live, old, shown, recent)
    s = Session()
    s.apply_all(events)
    assert {r.pid for r in s.snapshot(window=None).roles if r.role == "worker"} == set(last)
    assert sum(p["role"] == "worker" for p in report["processes"]) == 20
    # While the job runs, a listed worker whose own last report said it exited is not
    # counted as running (the header's "+N workers", the panel's "(N ended)")
    from perftop.events import JobExit

    cut = max(i for i, ev in enumerate(events) if isinstance(ev, WorkerStats) and ev.final)
    s = Session()
    s.apply_all(ev for ev in events[: cut + 1] if not isinstance(ev, JobExit))
    snap = s.snapshot()
    listed = {r.pid for r in snap.roles if r.role == "worker"}
    ended = {ev.pid for ev in events[: cut + 1] if isinstance(ev, WorkerStats) and ev.final}
    assert listed & ended, (listed, ended)  # an exited worker is still listed a few seconds
    assert snap.running_workers() == len(listed - ended), (listed, ended)
