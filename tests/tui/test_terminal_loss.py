"""Killing perftop's terminal (its tmux session) at random moments never leaves a perftop
behind in it: a running job goes on with the background monitor (recording, attachable),
an ended job's recording is closed, and every recording stays readable."""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import shutil
import signal
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
TRIES = 5
GONE_WITHIN_S = 10.0  # GRACE_S (3) and the hand-over, on a loaded 2-core machine


def _start(rec: Path, steps: int) -> str:
    name = f"perftop-hup-{uuid.uuid4().hex[:6]}"
    cmd = [sys.executable, "-m", "perftop", "run", "--record", str(rec), "--refresh", "0.25",
           sys.executable, str(WORKLOAD), "--steps", str(steps), "--workers", "2"]  # fmt: skip
    subprocess.run([TMUX, "new-session", "-d", "-s", name, "-x", "120", "-y", "40",
                    shlex.join(cmd) + "; sleep 30"], check=True)  # fmt: skip
    return name


def _ours(rec: Path, which: str) -> list[psutil.Process]:
    """perftop processes of this recording: the monitor in the terminal ("--record") or
    the background monitor it forked when leaving the job running ("--append"), told
    apart by the new session the background one leads."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if str(rec) not in cmd or "--record" not in cmd:
            continue
        try:
            background = os.getsid(p.pid) == p.pid
        except OSError:
            continue
        if background == (which == "--append"):
            found.append(p)
    return found


def _kill(name: str) -> float:
    subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True)
    return time.monotonic()


def _wait_gone(rec: Path, since: float) -> float:
    while _ours(rec, "--record"):
        assert time.monotonic() - since < GONE_WITHIN_S, "perftop outlived its terminal"
        time.sleep(0.1)
    return time.monotonic() - since


def _replay(rec: Path):
    session = Session()
    session.apply_all(read_events(rec))  # raises on an unreadable recording
    return session.snapshot(window=None)


def _cleanup(rec: Path, job_pid: int | None) -> None:
    if job_pid is None and rec.exists():
        with contextlib.suppress(Exception):
            job_pid = _replay(rec).meta.job_pid
    if job_pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(job_pid, signal.SIGKILL)  # the job has its own session and group
    for p in _ours(rec, "--append") + _ours(rec, "--record"):
        with contextlib.suppress(psutil.Error):
            p.kill()


def test_killing_the_terminal_while_the_job_runs(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for i in range(TRIES):
        rec = tmp_path / f"run{i}.perftop"
        name = _start(rec, steps=4000)
        job_pid = None
        try:
            time.sleep(rng.uniform(0.2, 3.5))  # before, while or after the app comes up
            if rng.random() < 0.5:
                subprocess.run([TMUX, "resize-window", "-t", name, "-x", "90", "-y", "30"],
                               capture_output=True)  # fmt: skip
            took = _wait_gone(rec, _kill(name))
            if not rec.exists():
                continue  # killed before perftop opened its recording
            snap = _replay(rec)
            job_pid = snap.meta.job_pid
            if job_pid is None:
                continue  # killed before the job started
            assert psutil.pid_exists(job_pid), f"try {i} (seed {seed}): the job was stopped"
            assert _ours(rec, "--append"), f"try {i} (seed {seed}): no background monitor"
            assert took < GONE_WITHIN_S
        finally:
            subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True)
            _cleanup(rec, job_pid)


def test_killing_the_terminal_after_the_job_ended(tmp_path: Path) -> None:
    rec = tmp_path / "ended.perftop"
    name = _start(rec, steps=30)
    try:
        deadline = time.monotonic() + 60
        while True:
            screen = subprocess.run([TMUX, "capture-pane", "-p", "-t", name],
                                    capture_output=True, text=True).stdout  # fmt: skip
            if "exited with code 0" in screen:
                break
            assert time.monotonic() < deadline, screen
            time.sleep(0.3)
        seen = time.time()
        time.sleep(3)  # the app stays open to be read; the recording ended with the job
        _wait_gone(rec, _kill(name))
        assert not _ours(rec, "--append")  # nothing to hand over
        snap = _replay(rec)
        assert snap.meta.ended and snap.meta.exit_code == 0 and snap.steps.count == 30
        last = max(t for e in read_events(rec) if (t := getattr(e, "t", None)) is not None)
        assert last < seen, f"recorded {last - seen:.1f} s after the job's end was shown"
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True)
        _cleanup(rec, None)


def test_a_demo_stops_with_its_terminal(tmp_path: Path) -> None:
    """``perftop demo`` trains until q: left running without its terminal, nobody would
    end it (it trained and recorded on, two cores busy, for half an hour in a trial).
    Its job is stopped instead, and its recording closed."""
    rec = tmp_path / "demo.perftop"
    name = f"perftop-demo-{uuid.uuid4().hex[:6]}"
    cmd = [sys.executable, "-m", "perftop", "demo", "--record", str(rec), "--refresh", "0.25"]
    subprocess.run([TMUX, "new-session", "-d", "-s", name, "-x", "120", "-y", "40",
                    shlex.join(cmd) + "; sleep 30"], check=True)  # fmt: skip
    job_pid = None
    try:
        deadline = time.monotonic() + 90
        while True:  # training: steps recorded
            with contextlib.suppress(Exception):
                snap = _replay(rec)
                job_pid = snap.meta.job_pid
                if snap.steps.count >= 5:
                    break
            assert time.monotonic() < deadline, "the demo never trained"
            time.sleep(0.5)
        since = _kill(name)
        _wait_gone(rec, since)
        assert job_pid is not None
        while psutil.pid_exists(job_pid) and psutil.Process(job_pid).status() != "zombie":
            assert time.monotonic() - since < GONE_WITHIN_S + 10, "the demo trains on"
            time.sleep(0.2)
        assert not _ours(rec, "--append")  # no background monitor was left
        snap = _replay(rec)
        assert snap.meta.ended and snap.steps.count >= 5
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True)
        _cleanup(rec, job_pid)
