"""Stacks without sudo: a hooked job names its monitor as its ptracer (``prctl(PR_SET_PTRACER,
monitor pid)``) once it has connected, so that under Yama's ``ptrace_scope=1`` the monitor and
py-spy can read it. Seen from the outside with strace on a real job and a real monitor: the
call is made with the pid of the process listening on the socket (this VM has no Yama, so the
kernel answers EINVAL, which the hook ignores), and never with ``PERFTOP_NO_PTRACER``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perftop.monitor.jobenv import hook_env

MONITOR = """
import os, sys
from perftop.monitor.server import Server
Server(lambda frame, events: None, sys.argv[1]).start()
print(os.getpid(), flush=True)
sys.stdin.read()
"""

JOB = """
import time, perftop
for _ in range(50):
    perftop.step()  # the first step arms the hook: a monitor answers, the sender connects
    time.sleep(0.01)
print("JOB done", flush=True)
"""


def _prctl_calls(tmp_path: Path, sock: Path, **extra: str) -> list[str]:
    """The job's PR_SET_PTRACER calls, as strace -f saw them (threads included)."""
    trace = tmp_path / f"strace{len(extra)}.txt"
    env = {**hook_env(sock), **extra}
    out = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=prctl", "-o", str(trace), sys.executable, "-c", JOB],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0 and "JOB done" in out.stdout, out.stderr[-800:]
    return [ln for ln in trace.read_text().splitlines() if "PR_SET_PTRACER" in ln]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (.ci/run installs it)")
def test_the_job_names_its_monitor_as_ptracer(tmp_path: Path) -> None:
    sock = tmp_path / "m.sock"
    mon = subprocess.Popen([sys.executable, "-c", MONITOR, str(sock)], text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert mon.stdout is not None
        pid = int(mon.stdout.readline())
        calls = _prctl_calls(tmp_path, sock)
        assert calls, "no prctl(PR_SET_PTRACER) in the hooked job"
        named = {int(m.group(1)) for c in calls if (m := re.search(r"PR_SET_PTRACER, (\d+)", c))}
        assert named == {pid}, (calls, pid)
        assert _prctl_calls(tmp_path, sock, PERFTOP_NO_PTRACER="1") == []
    finally:
        mon.kill()
        mon.wait()
