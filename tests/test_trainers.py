"""Several trainers without ranks (hogwild through torch.multiprocessing): every trainer's
steps are counted to its last one (a multiprocessing child ends with ``os._exit``, which
runs no ``atexit``), and the job's total is theirs together."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.helpers import WORKLOADS, run_and_report


def test_hogwild_trainers_are_counted_each_and_together(tmp_path: Path) -> None:
    proc, report = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "hogwild.py"),
                                  "2", "40")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    own = [int(n) for n in re.findall(r"trainer \d: (\d+) steps", proc.stdout)]
    assert sorted(own) == [40, 40], proc.stdout
    ranks = report["ranks"]
    assert sorted(r["steps"] for r in ranks) == [40, 40], ranks  # the last steps too
    steps = report["steps"]
    assert steps["trainers"] == 2 and steps["total_count"] == 80, steps
    assert steps["total_steps_per_s"] > steps["steps_per_s"]
    assert steps["one_after_another"] is False  # they trained together: rates add up
    assert "80 steps in 2 trainers (40 + 40)" in proc.stderr, proc.stderr
    roles = {p["pid"]: p["role"] for p in report["processes"]}
    assert sorted(roles[r["pid"]] for r in ranks) == ["main", "main"]
    launchers = [p for p in report["processes"] if p["role"] == "other"]
    assert launchers, "the launcher is labelled apart from the trainers"
