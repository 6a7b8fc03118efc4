"""Real recordings for the replay, export and diff tests, made once per test session:
a starved input pipeline, the same job fixed with workers, and a job with sync sites."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import WORKLOADS, perftop


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
        "fixed": record(where, "fixed", bound, "120", "2"),  # workers live long enough to sample
        "sync": record(where, "sync", str(WORKLOADS / "sync_train.py")),
    }
