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
