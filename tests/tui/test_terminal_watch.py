"""The terminal watch on a real pseudo-terminal whose other end goes away, with an app that
never returns (as Textual blocked on a dead tty) and with one that does."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

SCRIPT = """
import os, sys, threading, time
from perftop.tui.terminal_watch import TerminalWatch

fd = int(sys.argv[1]); mode = sys.argv[2]
out = open(sys.argv[3], "w", buffering=1)
asked = threading.Event()
def conclude():
    out.write("concluded by the watch\\n")
    return 7
watch = TerminalWatch(asked.set, conclude, fds=(fd,), grace_s=0.5).start()
out.write("watching\\n")
if mode == "stuck":
    threading.Event().wait()  # the app never returns
asked.wait()
watch.release()
out.write(f"main concludes after {watch.reason}\\n")
watch.done(5)
out.write("not reached\\n")
"""


@pytest.mark.parametrize(("mode", "code", "said"), [
    ("stuck", 7, "concluded by the watch"),
    ("returns", 5, "main concludes after the terminal hung up"),
])  # fmt: skip
def test_a_hung_up_terminal_ends_perftop(tmp_path, mode, code, said):
    master, slave = os.openpty()
    log = tmp_path / "log"
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(slave), mode, str(log)], pass_fds=(slave,)
    )
    os.close(slave)
    try:
        deadline = time.monotonic() + 20
        while not (log.exists() and "watching" in log.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        time.sleep(0.3)
        assert proc.poll() is None  # a live terminal: nothing happens
        os.close(master)  # the terminal goes away
        t0 = time.monotonic()
        assert proc.wait(timeout=10) == code
        assert time.monotonic() - t0 < 3.0
        text = log.read_text()
        assert said in text and "not reached" not in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_check_sees_a_hang_up_at_once():
    """The app may fail on the dead terminal before the watch thread looks again."""
    from perftop.tui.terminal_watch import TerminalWatch

    master, slave = os.openpty()
    try:
        watch = TerminalWatch(lambda: None, lambda: 0, fds=(slave,))
        assert not watch.check() and not watch.lost
        os.close(master)
        assert watch.check() and watch.reason == "the terminal hung up"
    finally:
        os.close(slave)
