"""Shared fixtures. Subprocesses must import this checkout's perftop, not an installed one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
)
# Workloads that call plain `python` (a shell script) get this interpreter.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
# Keep small CPU trainings quick and quiet on 2-core CI machines.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("PYTHONWARNINGS", "ignore")


@pytest.fixture
def python() -> str:
    return sys.executable


@pytest.fixture
def workloads() -> Path:
    return ROOT / "tests" / "workloads"
