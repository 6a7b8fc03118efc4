"""Signal tests hold whatever the shell that started the suite ignores, and perftop hands
the job the dispositions it was given (a job started from a background shell that ignores
SIGINT ignores it under perftop too, exactly as it would alone)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers import default_sigint

ROOT = Path(__file__).resolve().parent.parent
SHOW = "import signal; h = signal.getsignal(signal.SIGINT); print('SIGINT', {signal.SIG_IGN: 'ignored', signal.default_int_handler: 'KeyboardInterrupt'}.get(h, h))"


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _job_sigint(tmp_path: Path, preexec) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", sys.executable,
         "-c", SHOW],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        preexec_fn=preexec,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_job_keeps_the_sigint_disposition_perftop_was_given(tmp_path):
    assert "SIGINT KeyboardInterrupt" in _job_sigint(tmp_path, default_sigint)
    assert "SIGINT ignored" in _job_sigint(tmp_path, _ignore_sigint)
