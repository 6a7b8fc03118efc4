"""Real recordings for the replay, export and diff tests, made once per test session:
a starved input pipeline, the same job fixed with workers, and a job with sync sites; and
the starved DataLoader run that the hints tests share."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
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


def shared(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Any]) -> Any:
    """``make(folder)``'s JSON-able result, made once for the whole session: pytest-xdist's
    workers share one base folder, and the first to take the lock makes it (each worker
    made its own: ~20 s of a 2-core run's time each). Read-only for every test."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    where, done = base / name, base / f"{name}.json"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir()
            done.write_text(json.dumps(make(where)))
        return json.loads(done.read_text())


def _recordings(where: Path) -> dict[str, str]:
    bound = str(WORKLOADS / "input_bound.py")
    return {
        "starved": str(record(where, "starved", bound, "40", "0")),
        # workers live long enough to sample (300 steps, 5 s: at 120, 2 s, a busy CI host
        # once sampled none of them); 4 keep up with a loop of 8 ms a step (a batch every
        # 4 ms of 16 each: twice what it takes; with the starved run's 4 ms a step, a busy
        # CI host once left it waiting 5.7 ms a step, a third of the starved run's 17)
        "fixed": str(record(where, "fixed", bound, "300", "4", "8")),
        "sync": str(record(where, "sync", str(WORKLOADS / "sync_train.py"))),
    }


@pytest.fixture(scope="session")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Shared by every test that asks (tests/conftest.py defines it once): read them, never
    write beside them; a test that changes a recording copies it into its own tmp_path."""
    return {k: Path(v) for k, v in shared(tmp_path_factory, "recordings", _recordings).items()}


@dataclass(frozen=True)
class Run:
    proc: subprocess.CompletedProcess[str]  # `perftop run --headless --record`
    rec: Path
    report: dict[str, Any]  # `perftop report --json` of ``rec``


def _starved(where: Path) -> dict[str, Any]:
    proc, rep = run_and_report(where, sys.executable, str(WORKLOADS / "loader_train.py"), "320")
    return {"proc": [proc.args, proc.returncode, proc.stdout, proc.stderr], "report": rep,
            "rec": str(where / "r.perftop")}  # fmt: skip


@pytest.fixture(scope="session")
def starved_loader_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """`loader_train.py 320` (2 slow workers starve the loop) run and recorded once: the
    live hints test, the replay-gives-the-same-hints test and the workers-bottleneck test
    read the same run."""
    got = shared(tmp_path_factory, "starved_loader", _starved)
    return Run(subprocess.CompletedProcess(*got["proc"]), Path(got["rec"]), got["report"])
