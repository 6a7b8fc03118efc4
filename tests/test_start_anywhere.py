"""Ordinary setups never stop the job (issue 43, item 2): closed standard streams, a
``$TMPDIR`` too long for a socket's path, a ``PYTHONPATH`` that perftop's entry takes over
the kernel's limit. Where perftop cannot serve a socket, the job runs with one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import WORKLOADS

PERFTOP = [sys.executable, "-m", "perftop", "run", "--no-record"]
SAY_SOCKET = "import os; print('socket', os.environ.get('PERFTOP_SOCKET', '-'))"


def _run(
    cmd: str, tmp_path: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``cmd`` through a shell (its redirections close streams), with a timeout."""
    return subprocess.run(
        ["sh", "-c", cmd], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_closed_stdin_and_stdout_the_job_runs(tmp_path):
    out = tmp_path / "ran"
    job = f"{sys.executable} -c \"open('{out}', 'w').write('yes')\""
    # not --headless: perftop asks the terminal whether to show its TUI
    r = _run(f"{' '.join(PERFTOP)} -- {job} <&- >&-", tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert out.read_text() == "yes"
    r = _run(f"{' '.join(PERFTOP)} --headless -- {job} 2>&-", tmp_path)
    assert r.returncode == 0, r.stdout


def test_a_long_tmpdir_takes_a_shorter_base_and_the_hook_connects(tmp_path):
    long_tmp = tmp_path / ("t" * (120 - len(str(tmp_path))))
    long_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(long_tmp)}
    env.pop("XDG_RUNTIME_DIR", None)
    r = subprocess.run(
        [*PERFTOP, "--headless", "--", sys.executable, str(WORKLOADS / "many_steps.py"), "20", "0"],
        cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "perftop: 20 steps" in r.stderr, r.stderr  # the hook connected: its steps came


def test_no_base_fits_the_job_runs_without_the_hook_with_one_line(tmp_path):
    long_tmp = tmp_path / ("t" * (120 - len(str(tmp_path))))
    long_tmp.mkdir()
    code = (
        "import sys; from perftop.monitor import sockpath; sockpath.FALLBACK_BASES = ();"
        "from perftop.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "TMPDIR": str(long_tmp), "XDG_RUNTIME_DIR": str(long_tmp)}
    r = subprocess.run(
        [sys.executable, "-c", code, "run", "--headless", "--no-record", "--",
         sys.executable, "-c", SAY_SOCKET + "; raise SystemExit(7)"],
        cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 7 and "Traceback" not in r.stderr, r.stderr
    assert "socket -" in r.stdout  # the job ran, without the hook's socket
    said = [ln for ln in r.stderr.splitlines() if "cannot serve a socket" in ln]
    assert len(said) == 1 and "108" not in said[0] and "107 bytes" in said[0], r.stderr


def test_a_pythonpath_at_the_kernels_limit_runs_the_job_without_the_hook(tmp_path):
    # one environment string may be at most 128 KiB (MAX_ARG_STRLEN), its name included
    env = {**os.environ, "PYTHONPATH": "/" + "x" * (131072 - len("PYTHONPATH=/") - 2)}
    r = subprocess.run(
        [*PERFTOP, "--headless", "--", "sh", "-c", "echo ran; exit 5"],
        cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 5 and r.stdout.strip() == "ran", r.stderr
    said = [ln for ln in r.stderr.splitlines() if "E2BIG" in ln]
    assert len(said) == 1, r.stderr
