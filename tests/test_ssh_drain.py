"""Wherever perftop stands between a job and its output, perftop's side ending early never
ends the job: `run --stream-out` (ssh's pipes) once its reader is gone, the TUI's terminal
lost, "leave it running" with the monitor then killed. Each job prints for a few seconds
after perftop's side is gone and must finish with its own exit code (3), not a broken
pipe's (120, or an exception's 1)."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

from perftop.events import Output
from perftop.recording import read_events

# Started, then a line on stdout and on stderr every 0.1 s for about 2 s, then exit 3.
PRINTER = """
import sys, time
open(sys.argv[1], "w").write("1")
for i in range(int(sys.argv[2])):
    print("line", i, flush=True)
    print("err", i, file=sys.stderr, flush=True)
    time.sleep(0.1)
sys.exit(3)
"""
TMUX = shutil.which("tmux")


def _job(tmp_path: Path, lines: int = 20) -> tuple[list[str], Path, Path]:
    """The job (a shell running the printer, ``lines`` lines 0.1 s apart, then writing its
    exit code), and the files saying it started and how it ended."""
    script, started, rc = tmp_path / "printer.py", tmp_path / "started", tmp_path / "rc"
    script.write_text(PRINTER)
    line = (
        f"{shlex.quote(sys.executable)} {script} {started} {lines}; r=$?; echo $r > {rc}; exit $r"
    )
    return ["sh", "-c", line], started, rc


def _wait_file(path: Path, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.1)
    return path.read_text().strip()


def test_stream_out_reader_gone_the_job_goes_on(tmp_path):
    cmd, _, rc = _job(tmp_path)
    rec = tmp_path / "remote.perftop"
    p = subprocess.Popen(
        [sys.executable, "-m", "perftop", "run", "--stream-out", "--record", str(rec), "--", *cmd],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert p.stdout is not None and p.stderr is not None
        assert p.stdout.read(4)  # the stream has begun
        assert p.stderr.readline().startswith((b"line 0", b"err 0"))  # the output is relayed
        p.stdout.close()  # ssh went away: nobody reads our stdout or stderr any more
        p.stderr.close()
        assert p.wait(timeout=60) == 3  # perftop ends with the job, and with its code
    finally:
        with contextlib.suppress(ProcessLookupError):
            p.kill()
    assert _wait_file(rc) == "3"
    out = "".join(e.text for e in read_events(rec) if isinstance(e, Output))
    assert "line 19" in out and "err 19" in out  # drained into the recording


def test_left_running_then_the_monitor_killed_the_job_goes_on(tmp_path):
    cmd, started, rc = _job(tmp_path)
    leave = (
        "import sys\nfrom perftop.monitor.jobenv import RunConfig\n"
        "from perftop.monitor.runner import Job\n"
        "job = Job(RunConfig(tuple(sys.argv[1:]), capture_output=True)).start()\n"
        f"import os, time\nwhile not os.path.exists({str(started)!r}): time.sleep(0.05)\n"
        "print(job.leave(), job.output.dir, job.server.path, flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", leave, *cmd], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    bg, files, sock = out.stdout.split()
    os.kill(int(bg), signal.SIGKILL)  # and now the background monitor is gone too
    try:
        assert _wait_file(rc) == "3"
    finally:  # what the killed monitor would have removed
        shutil.rmtree(files, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.unlink(sock)


def test_lost_terminal_the_job_goes_on(tmp_path):
    assert TMUX is not None, "tmux is needed (.ci/run installs it)"
    cmd, started, rc = _job(tmp_path)
    name = f"perftop-drain-{uuid.uuid4().hex[:6]}"
    # A tmux server started earlier has its own environment: name this perftop's here.
    perftop = ["env", f"PYTHONPATH={os.environ['PYTHONPATH']}", sys.executable, "-m",
               "perftop", "run", "--no-record", "--", *cmd]  # fmt: skip
    subprocess.run([TMUX, "new-session", "-d", "-s", name, "-x", "100", "-y", "30",
                    shlex.join(perftop) + "; sleep 30"], check=True, cwd=tmp_path)  # fmt: skip
    try:
        try:
            _wait_file(started, timeout=60)
        except AssertionError:
            screen = subprocess.run([TMUX, "capture-pane", "-p", "-t", name],
                                    capture_output=True, text=True).stdout  # fmt: skip
            raise AssertionError(f"the job never started; the screen:\n{screen}") from None
        time.sleep(0.5)  # the TUI is up (or coming up) and the job printing
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True)
    assert _wait_file(rc) == "3"
    deadline = time.monotonic() + 20
    while _monitors(str(rc)):  # the background monitor saw the job end and left
        assert time.monotonic() < deadline, "the background monitor outlived the job"
        time.sleep(0.2)


def _monitors(mark: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "perftop" in cmd and any(mark in c for c in cmd):
            found.append(p)
    return found
