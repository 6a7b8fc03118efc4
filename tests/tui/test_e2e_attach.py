"""End to end, as a user would: a plain `python train.py` in the background, then
`perftop attach PID` inside tmux shows its workers and where they spend their time."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.tui.test_e2e import TMUX, capture, pytestmark, wait_for  # noqa: F401

WORKLOAD = Path(__file__).resolve().parents[1] / "workloads" / "plain_loader.py"


def test_attach_to_a_plain_training_in_tmux(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PERFTOP_SOCKET"}
    job = subprocess.Popen(
        [sys.executable, str(WORKLOAD), "90"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    name = f"perftop-e2e-{uuid.uuid4().hex[:6]}"
    try:
        assert job.stdout is not None and job.stdout.readline().strip() == "ready"
        cmd = [sys.executable, "-m", "perftop", "attach", str(job.pid), "--refresh", "0.25"]
        shell = f"{shlex.join(cmd)}; sleep 30"
        subprocess.run(
            [TMUX, "new-session", "-d", "-s", name, "-x", "160", "-y", "48", shell], check=True
        )
        # (a capture can catch the first frame half-written: the header, no panels yet)
        wait_for(name, r"OBSERVER: no hook[\s\S]*─ Stacks ─")
        time.sleep(0.5)
        screen = capture(name)  # the whole frame: a Stacks panel, and no Output panel
        assert "─ Stacks ─" in screen and "─ Output ─" not in screen
        wait_for(name, r"worker\s+\d+\s+\d+ samples")  # the workers, read from their stacks
        subprocess.run([TMUX, "send-keys", "-t", name, "7"], check=True)  # focus Stacks,
        time.sleep(0.5)  # (two keys in one burst can arrive as one sequence)
        subprocess.run([TMUX, "send-keys", "-t", name, "z"], check=True)  # and zoom it
        screen = wait_for(name, r"\d+%\s+plain_loader\.py:\d+ dilate")
        # the main process: sampled in its turn, or at the next tick after a failed dump
        screen = wait_for(name, r"waiting on the DataLoader queue")
        assert "Traceback" not in screen
        subprocess.run([TMUX, "send-keys", "-t", name, "q"], check=True)
        wait_for(name, r"perftop: worker \d+: .*dilate")  # the summary after detaching
        assert job.poll() is None  # the observed training goes on, untouched
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True)
        job.kill()
        job.wait(10)
