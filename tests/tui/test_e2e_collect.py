"""End to end: `perftop collect` with its TUI in a process of its own, in tmux, fed by a
real forwarded training (and a forwarder with the wrong token)."""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

from perftop.model import Session
from perftop.recording import read_events
from tests.tui.test_e2e import TMUX, WORKLOAD, capture, pytestmark, wait_for

__all__ = ["pytestmark"]
TOKEN = "e2e-collect-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node(port: int, token: str, steps: int, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFTOP_")}
    env["PERFTOP_TOKEN"] = token
    cmd = [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--forward",
           f"127.0.0.1:{port}", "--", sys.executable, str(WORKLOAD), "--steps", str(steps),
           "--workers", "1"]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def tui_children(collect_pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        kids = psutil.Process(collect_pid).children()
        return [k for k in kids if "perftop.tui.process" in " ".join(k.cmdline())]
    return []


def start(name: str, cmd: list[str], done: Path, width: int, height: int) -> None:
    """``cmd`` in a new tmux session; its exit status goes to ``done`` as ``EXIT N``."""
    shell = (
        f"PERFTOP_TOKEN={TOKEN} {shlex.join(cmd)}; echo EXIT $? > {shlex.quote(str(done))}; "
        "sleep 60"
    )
    subprocess.run(
        [TMUX, "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), shell],
        check=True,
    )


def exited(name: str, done: Path) -> str:
    """The screen once the command exited 0 (within 30 s)."""
    deadline = time.monotonic() + 30
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert done.exists(), capture(name)
    assert done.read_text().strip() == "EXIT 0"
    return capture(name)


def test_collect_draws_in_its_own_process_resizes_and_quits_on_q(tmp_path: Path) -> None:
    rec, done = tmp_path / "fleet.perftop", tmp_path / "rc"
    port = free_port()
    name = f"perftop-collect-{uuid.uuid4().hex[:6]}"
    cmd = [sys.executable, "-m", "perftop", "collect", "--listen", f"127.0.0.1:{port}",
           "--record", str(rec)]  # fmt: skip
    start(name, cmd, done, 160, 48)
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        wait_for(name, r"perftop collect --listen")  # the TUI is up
        collect = next(
            p for p in psutil.process_iter(["cmdline"]) if str(rec) in (p.info["cmdline"] or [])
        )
        assert len(tui_children(collect.pid)) == 1  # the TUI is a process of its own
        nodes.append(node(port, TOKEN, 3000, tmp_path / "good.log"))  # bounded: ~1 min
        nodes.append(node(port, "not-the-token-at-all", 50, tmp_path / "bad.log"))
        screen = wait_for(name, r"steps [1-9][\d,]*\s")
        for title in ("Steps", "Processes / Workers", "Hints", "Output"):
            assert f"─ {title} ─" in screen, title
        wait_for(name, r"refused a forwarder")  # a note on the screen...
        assert "perftop: refused" not in capture(name)  # ...not a line across the TUI
        subprocess.run([TMUX, "resize-window", "-t", name, "-x", "80", "-y", "24"], check=True)
        wait_for(name, r"─ Steps ─[\s\S]*─ Output ─")  # the child got SIGWINCH and laid out
        assert max(len(line) for line in capture(name).splitlines()) <= 80
        subprocess.run([TMUX, "send-keys", "-t", name, "q"], check=True)
        after = exited(name, done)
        # Lines said while the TUI had the terminal come after it, with the summary.
        assert "perftop: refused a forwarder from 127.0.0.1: wrong token" in after
        assert "perftop: 1 node(s), 1 training process(es)" in after
        assert "Traceback" not in after
        assert not tui_children(collect.pid)
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True)
        for p in nodes:  # each node's job first: a killed monitor leaves its job running
            with contextlib.suppress(psutil.Error):
                for c in psutil.Process(p.pid).children(recursive=True):
                    c.kill()
            p.kill()
            p.wait()
    session = Session()
    session.apply_all(read_events(rec))
    assert session.snapshot().steps.count > 0  # the recording ended cleanly, steps in it


def test_collect_duration_ends_its_tui_process_and_gives_the_terminal_back(tmp_path: Path) -> None:
    done = tmp_path / "rc"
    name = f"perftop-collect-{uuid.uuid4().hex[:6]}"
    cmd = [sys.executable, "-m", "perftop", "collect", "--listen", f"127.0.0.1:{free_port()}",
           "--no-record", "--duration", "4"]  # fmt: skip
    start(name, cmd, done, 120, 40)
    try:
        wait_for(name, r"perftop collect --listen")  # the TUI is up
        after = exited(name, done)
        assert "perftop: 0 node(s)" in after and "collected for 4" in after
        assert "─ Steps ─" not in after  # the TUI left the screen
    finally:
        subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True)
