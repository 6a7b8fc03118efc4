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
    lines = processes_table(rows).splitlines()
    worker = lines[0].split().index("worker")
    assert [ln.split()[worker] for ln in lines[1:]] == ["0", "1·L1", "-"], lines
