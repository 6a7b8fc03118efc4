"""In a real terminal (tmux), with a real job: a burst of keys on the help screen no longer
ends the app, and any failure of the app leaves the job running, detached as ``l`` leaves
it (recording on, attachable), in one line; ``attach`` and ``replay`` viewers that fail
exit 1 with one line. The failure is a real exception in the real app: the test's launcher
breaks one screen (``k``'s) before calling perftop's own ``main``."""

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

from tests.tui.test_e2e import WORKLOAD

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux not installed")
ROOT = Path(__file__).resolve().parents[2]
RECORDING = Path(__file__).parent / "recordings" / "stall.perftop"
LAUNCHER = """
import sys
from perftop.tui.screens import stacks

def broken(self):
    raise RuntimeError("the stacks screen broke")

stacks.StacksScreen.compose = broken
from perftop.cli import main
sys.exit(main(sys.argv[1:]))
"""
FAILED = re.compile(
    r"perftop: (error: )?the screen failed \(RuntimeError: the stacks screen broke\); traceback in (\S+)"
)


def tmux(*args: str, sock: str | None = None) -> str:
    """A tmux command on the server of socket ``sock``: each terminal its own server, so
    that no other test's session ending (the default server exits with its last session)
    can take this one's with it (a CI run read this test's screen empty for 60 s)."""
    return subprocess.run(
        [TMUX or "tmux", *(("-L", sock) if sock else ()), *args], capture_output=True, text=True
    ).stdout


class Term:
    """A tmux session running ``cmd``; ``rc`` holds its exit code once it ends."""

    def __init__(self, tmp: Path, cmd: list[str], size: tuple[int, int] = (120, 40)) -> None:
        self.name = f"pt-fail-{uuid.uuid4().hex[:6]}"
        self.rc = tmp / f"{self.name}.rc"
        shell = f"{shlex.join(cmd)} 2>&1; echo $? > {self.rc}; sleep 60"
        w, h = size
        tmux(
            "new-session", "-d", "-s", self.name, "-x", str(w), "-y", str(h), "-c", str(tmp),
            shell, sock=self.name,
        )  # fmt: skip

    def screen(self) -> str:
        # joined (-J): one of perftop's lines is one line, however narrow the terminal
        return tmux("capture-pane", "-p", "-J", "-t", f"={self.name}:", sock=self.name)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(0.25)
        raise AssertionError(f"{pattern!r} never appeared; screen was:\n{self.screen()}")

    def keys(self, keys: str) -> None:
        tmux("send-keys", "-t", f"={self.name}:", "-l", keys, sock=self.name)  # one burst

    def exit_code(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.rc.exists() and self.rc.read_text().strip():
                return int(self.rc.read_text())
            time.sleep(0.2)
        raise AssertionError(f"never exited; screen was:\n{self.screen()}")

    def pane_pid(self) -> int:
        pane = tmux("display", "-p", "-t", f"={self.name}:", "#{pane_pid}", sock=self.name)
        return int(pane.strip() or 0)

    def close(self) -> None:
        path = tmux("display", "-p", "#{socket_path}", sock=self.name).strip()
        tmux("kill-server", sock=self.name)
        if path.endswith(self.name):  # tmux leaves its socket file behind
            Path(path).unlink(missing_ok=True)


def test_failures_of_the_screen_never_stop_the_job(tmp_path: Path) -> None:
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    perftop = [sys.executable, str(launcher)]
    rec = tmp_path / "run.perftop"
    job_cmd = [sys.executable, str(WORKLOAD), "--steps", "100000", "--workers", "0"]
    terms: list[Term] = []
    job: int | None = None
    try:
        run = Term(tmp_path, [*perftop, "run", "--record", str(rec), "--refresh", "0.25", *job_cmd])
        terms.append(run)
        run.wait_for(r"steps [1-9][\d,]*\s")
        for _ in range(3):  # help, then two keys in one write: it closes once, the app goes on
            run.keys("?")
            run.wait_for("perftop help")
            run.keys("ab")
            run.wait_for(r"^(?![\s\S]*perftop help)")  # the help screen has gone
        assert "ScreenStackError" not in run.screen()
        run.keys("k")  # the broken screen: the app fails, the job goes on
        assert run.exit_code() == 0
        screen = run.screen()
        failed = FAILED.search(screen)
        assert failed is not None, screen
        assert "the stacks screen broke" in Path(failed.group(2)).read_text()
        left = re.search(r"perftop: job (\d+) keeps running", screen)
        assert left is not None, screen
        job = int(left.group(1))
        assert f"recording to {rec}" in screen and f"perftop attach {job}" in screen
        assert psutil.Process(job).is_running()
        assert "Traceback" not in screen.split("perftop: the screen failed")[0][-2000:]
        size = rec.stat().st_size
        deadline = time.monotonic() + 30
        while rec.stat().st_size == size and time.monotonic() < deadline:
            time.sleep(0.2)
        assert rec.stat().st_size > size  # the background monitor records on

        # Viewers: attach to that session, replay a recording; each fails with one line.
        viewers = [Term(tmp_path, [*perftop, "attach", str(job)])]
        viewers.append(Term(tmp_path, [*perftop, "replay", "--paused", str(RECORDING)]))
        terms += viewers
        for v in viewers:
            v.wait_for(r"─ Output ─|─ Steps ─")
            v.keys("k")
            assert v.exit_code() == 1
            lines = [ln for ln in v.screen().splitlines() if ln.strip()]
            assert FAILED.search(lines[-1]) is not None, v.screen()
            assert not any("Traceback" in ln for ln in lines)
        assert psutil.Process(job).is_running()  # a failed viewer leaves the session alone
    finally:
        owned = []
        for t in terms:
            pane = int(
                tmux("display", "-p", "-t", f"={t.name}:", "#{pane_pid}", sock=t.name).strip() or 0
            )
            with contextlib.suppress(psutil.Error):
                owned += psutil.Process(pane).children(recursive=True)
        if job is not None:  # left running by design: this test ends it
            with contextlib.suppress(psutil.Error):
                owned.append(psutil.Process(job))
        for t in terms:
            t.close()
        for p in owned:
            with contextlib.suppress(psutil.Error):
                p.kill()


HUNG_UP = """
import os, sys, time
from textual.drivers.linux_driver import LinuxDriver

def run_input_thread(self):
    # reads of a terminal that hung up fail (EIO) before its SIGHUP comes: here, once the
    # test says so, while the terminal itself stays (the app's way out is what is tested)
    while not os.path.exists(os.environ["HANG_UP_AT"]):
        if self.exit_event.is_set():
            return
        time.sleep(0.05)
    raise OSError(5, "Input/output error")

LinuxDriver.run_input_thread = run_input_thread
from perftop.tui.input_thread import QuietInput  # perftop's driver's own input thread

QuietInput.run_input_thread = run_input_thread
from perftop.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_failed_terminal_read_leaves_the_job_running_in_one_line(tmp_path: Path) -> None:
    """Textual's input thread failing (a terminal hanging up makes its reads fail before
    SIGHUP comes) panics the app, which returns as if the user had quit: the job must go
    on, detached, and the screen gets one line, no traceback."""
    launcher = tmp_path / "launcher.py"
    launcher.write_text(HUNG_UP)
    flag = tmp_path / "hang-up"
    rec = tmp_path / "run.perftop"
    job_cmd = [sys.executable, str(WORKLOAD), "--steps", "100000", "--workers", "0"]
    cmd = ["env", f"HANG_UP_AT={flag}", sys.executable, str(launcher), "run", "--record",
           str(rec), "--refresh", "0.25", *job_cmd]  # fmt: skip
    run = Term(tmp_path, cmd)
    job: int | None = None
    try:
        run.wait_for(r"steps [1-9][\d,]*\s")
        flag.touch()
        assert run.exit_code() == 0
        screen = run.screen()
        left = re.search(r"perftop: job (\d+) keeps running", screen)
        assert left is not None, screen
        job = int(left.group(1))
        assert psutil.Process(job).is_running()
        assert "perftop: the screen failed (OSError: [Errno 5] Input/output error)" in screen
        assert "Traceback" not in screen, screen
    finally:
        pane = int(
            tmux("display", "-p", "-t", f"={run.name}:", "#{pane_pid}", sock=run.name).strip() or 0
        )
        owned = []
        with contextlib.suppress(psutil.Error):
            owned += psutil.Process(pane).children(recursive=True)
        if job is not None:
            with contextlib.suppress(psutil.Error):
                owned.append(psutil.Process(job))
        run.close()
        for p in owned:
            with contextlib.suppress(psutil.Error):
                p.kill()
