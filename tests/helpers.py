"""Running the real perftop CLI on real training subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

WORKLOADS = Path(__file__).resolve().parent / "workloads"


def perftop(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perftop", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def run_and_report(
    tmp_path: Path, *cmd: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    rec = tmp_path / "r.perftop"
    proc = perftop("run", "--headless", "--record", str(rec), "--", *cmd, cwd=tmp_path)
    rep = perftop("report", "--json", str(rec), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    return proc, json.loads(rep.stdout)


def spawn_slow_job(tmp_path: Path, *record: str, **popen: Any) -> subprocess.Popen[str]:
    """`perftop run --headless RECORD... -- python slow_steps.py`, started and ready (the
    job has printed "ready"); ``record`` is e.g. ("--record", path) or ("--no-record",)."""
    mon = subprocess.Popen(
        [sys.executable, "-m", "perftop", "run", "--headless", *record, "--", sys.executable,
         str(WORKLOADS / "slow_steps.py")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, **popen)  # fmt: skip
    assert mon.stdout is not None and mon.stdout.readline().strip() == "ready"
    return mon
