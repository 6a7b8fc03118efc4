"""Real recordings for the replay, export and diff tests, made once per test session:
a starved input pipeline, the same job fixed with workers, and a job with sync sites; and
the starved DataLoader run that the hints tests share."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import WORKLOADS, perftop, run_and_report


def record(where: Path, name: str, *cmd: str) -> Path:
    rec = where / f"{name}.perftop"
    r = perftop("run", "--headless", "--record", str(rec), "--", sys.executable, *cmd, cwd=where)
    assert r.returncode == 0, r.stderr
    return rec


@pytest.fixture(scope="session")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Shared by every test that asks (tests/conftest.py defines it once): read them, never
    write beside them; a test that changes a recording copies it into its own tmp_path."""
    where = tmp_path_factory.mktemp("recordings")
    bound = str(WORKLOADS / "input_bound.py")
    return {
        "starved": record(where, "starved", bound, "40", "0"),
        # workers live long enough to sample (300 steps, 5 s: at 120, 2 s, a busy CI host
        # once sampled none of them); 4 keep up with the loop (a batch every 4 ms of 16
        # each; 2 left it waiting ~4 ms a step, near a third of the starved run's 18 ms)
        "fixed": record(where, "fixed", bound, "300", "4"),
        "sync": record(where, "sync", str(WORKLOADS / "sync_train.py")),
    }


@dataclass(frozen=True)
class Run:
    proc: subprocess.CompletedProcess[str]  # `perftop run --headless --record`
    rec: Path
    report: dict[str, Any]  # `perftop report --json` of ``rec``


@pytest.fixture(scope="session")
def starved_loader_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """`loader_train.py 320` (2 slow workers starve the loop) run and recorded once: the
    live hints test, the replay-gives-the-same-hints test and the workers-bottleneck test
    read the same run."""
    where = tmp_path_factory.mktemp("starved_loader")
    proc, rep = run_and_report(where, sys.executable, str(WORKLOADS / "loader_train.py"), "320")
    return Run(proc, where / "r.perftop", rep)
