"""DataLoader workers of every epoch are workers: with non-persistent workers each epoch starts
new processes, and the loader's report names only the newest; the workers' own reports keep
the earlier ones workers (they showed as ``other``)."""

from __future__ import annotations

import sys
from pathlib import Path

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
