"""The bundled demo trains until it is stopped (a newcomer explores at leisure), and a stop
is a clean end, not a failure."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from perftop.cli import main
from tests.helpers import default_sigint


def test_the_demo_trains_until_stopped_and_stops_cleanly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "perftop.demo.train", "--scenario", "sync", "--workers", "0",
         "--batch-size", "1"],
        stdout=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        for line in proc.stdout:  # past the 150 steps it used to end at
            if line.startswith("step  175"):
                break
            assert not line.startswith("done") and time.monotonic() < deadline, line
        proc.send_signal(signal.SIGINT)  # what `s` in perftop's quit prompt sends
        rest = proc.communicate(timeout=30)[0]
        assert proc.returncode == 0 and rest.strip().startswith("stopped: "), rest
    finally:
        proc.kill()


def test_demo_steps_must_be_positive(capsys) -> None:
    assert main(["demo", "--steps", "0", "--headless"]) == 2
    assert capsys.readouterr().err.strip() == "perftop: error: --steps must be at least 1"
