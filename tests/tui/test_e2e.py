"""End to end: `perftop run` on a real CPU training inside tmux, read from the screen."""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from perftop.model import Session
from perftop.recording import read_events

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux not installed")
WORKLOAD = Path(__file__).parent / "workloads" / "train_small.py"


def capture(name: str) -> str:
    return subprocess.run(
        [TMUX, "capture-pane", "-p", "-t", name], capture_output=True, text=True
    ).stdout


def wait_for(name: str, pattern: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = capture(name)
        if re.search(pattern, screen):
            return screen
        time.sleep(0.3)
    raise AssertionError(f"{pattern!r} never appeared; screen was:\n{screen}")


def test_perftop_run_in_tmux(tmp_path: Path) -> None:
    rec = tmp_path / "run.perftop"
    done = tmp_path / "rc"
    name = f"perftop-e2e-{uuid.uuid4().hex[:6]}"
    cmd = [
        sys.executable,
        "-m",
        "perftop",
        "run",
        "--record",
        str(rec),
        "--refresh",
        "0.25",
        sys.executable,
        str(WORKLOAD),
        "--steps",
        "4000",  # about a minute: bounded even if a failed run orphans the job
        "--workers",
        "2",
    ]
    shell = f"{shlex.join(cmd)}; echo $? > {shlex.quote(str(done))}; sleep 30"
    subprocess.run(
        [TMUX, "new-session", "-d", "-s", name, "-x", "120", "-y", "40", shell], check=True
    )
    try:
        screen = wait_for(name, r"steps [1-9][\d,]*\s")
        for title in ("Steps", "GPU", "Host", "Processes / Workers", "Sync", "Hints", "Output"):
            assert f"─ {title} ─" in screen, title
        assert "running" in screen
        wait_for(name, r"worker 1")  # panels repaint one by one: wait, don't race the frame
        wait_for(name, r"step\s+\d+\s+loss")  # the job's own stdout in the Output panel
        assert "Traceback" not in capture(name)
        subprocess.run([TMUX, "send-keys", "-t", name, "q"], check=True)
        wait_for(name, "The job is still running")
        subprocess.run([TMUX, "send-keys", "-t", name, "s"], check=True)
        deadline = time.monotonic() + 45
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.exists(), capture(name)
        assert done.read_text().strip() == "130"  # the job stopped on SIGINT
    finally:
        # SIGHUP leaves a job running by design: stop this test's job ourselves.
        jobs = [
            c
            for p in psutil.process_iter(["cmdline"])
            if str(rec) in (p.info["cmdline"] or [])
            for c in p.children(recursive=True)
        ]
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True)
        for proc in jobs:
            with contextlib.suppress(psutil.Error):
                proc.kill()
    session = Session()
    session.apply_all(read_events(rec))
    snap = session.snapshot()
    assert snap.steps.count > 0 and snap.meta.exit_code == 130
