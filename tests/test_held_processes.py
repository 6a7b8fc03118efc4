"""A process held where it stands (stopped by a SIGSTOP, a shell's Ctrl-Z, a job scheduler's
suspend; a debugger; uninterruptible sleep): its stack is still read, the stall or hang says
why it made no progress, and the steps it sends late once it runs again are the same stall.

Found trying a 2-rank DDP job as a user (``kill -STOP`` of rank 1): the hang hint said
"no stack yet" for 2 minutes (py-spy cannot pause a stopped process: "Failed to get stack
traces"), said nothing of the rank being stopped, and a second stall was captured when the
rank ran again; a single-process job stopped mid-step got no stall at all."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from perftop.events import Step
from perftop.model import Session
from perftop.monitor.stall import StallWatch
from tests.helpers import perftop


def _captures(watch_root: int, snaps: list, wait_s: float = 20.0) -> list:
    """What a :class:`StallWatch` of ``watch_root`` captured from ``snaps``, given in order,
    each after the capture the one before started (if any) is over."""
    got: list = []
    w = StallWatch(watch_root, lambda *evs: got.extend(evs))
    for snap in snaps:
        w(snap)
        deadline = time.time() + wait_s
        while w._busy.locked() and time.time() < deadline:
            time.sleep(0.02)
        assert not w._busy.locked(), "the capture never ended"
    return got


def test_a_stopped_process_is_read_where_it_stands_and_said_stopped():
    """py-spy cannot pause a stopped process to read it ("Failed to get stack traces"): it
    is read as it stands (it does not move), and the capture says it was stopped."""
    loop = "import time\nprint('looping', flush=True)\nwhile True:\n    time.sleep(0.05)\n"
    child = subprocess.Popen([sys.executable, "-c", loop], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "looping\n"
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10  # (the signal is delivered, not at once on a busy host)
        while psutil.Process(child.pid).status() != "stopped":
            assert time.monotonic() < deadline, "never stopped"
            time.sleep(0.01)
        s = Session()
        for i in range(10):
            s.apply(Step(child.pid, i, 100.0 + i * 0.1, 100.1 + i * 0.1))
        (cap,) = _captures(child.pid, [s.snapshot(now=101.0 + 2.5)])
    finally:
        child.kill()
        child.wait()
    assert cap.states == ((child.pid, "stopped"),), cap
    ((pid, _role, frames),) = cap.stacks
    # (its own code: in its sleep, line 4, or between two sleeps; on a busy host, still
    # finishing the print before the loop, line 2)
    assert pid == child.pid and frames[0][1] == "<string>" and 2 <= frames[0][2] <= 4, cap
    assert cap.note == "", cap


def test_a_process_a_tracer_holds_is_read_as_it_runs():
    """strace attached to a process: py-spy cannot pause it ("Failed to get stack traces"),
    and the capture had no stack for it; it is read without pausing it."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (.ci/run installs it)")
    loop = "import time\nprint('looping', flush=True)\nwhile True:\n    time.sleep(0.05)\n"
    child = subprocess.Popen([sys.executable, "-c", loop], stdout=subprocess.PIPE, text=True)
    tracer = None
    try:
        assert child.stdout is not None and child.stdout.readline() == "looping\n"
        tracer = subprocess.Popen(["strace", "-p", str(child.pid), "-o", os.devnull],
                                  stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert tracer.stderr is not None and "attached" in tracer.stderr.readline()
        s = Session()
        for i in range(10):
            s.apply(Step(child.pid, i, 100.0 + i * 0.1, 100.1 + i * 0.1))
        (cap,) = _captures(child.pid, [s.snapshot(now=101.0 + 2.5)])
    finally:
        if tracer is not None:
            tracer.kill()
            tracer.wait()
        child.kill()
        child.wait()
    ((pid, _role, frames),) = cap.stacks
    assert pid == child.pid and frames[0][1] == "<string>" and cap.note == "", cap
    # (running or sleeping, or caught at one of strace's stops at a system call)
    assert cap.states in ((), ((child.pid, "tracing-stop"),)), cap


def test_steps_a_stopped_process_sends_late_are_the_stall_it_was_in():
    """A stopped process's hook sends nothing until it runs again; then its steps ended
    before the stop come, and the next step looks stalled since the last of them: the same
    stall, not dumped again. A stall begun after the capture is a new one."""
    me = os.getpid()
    s = Session()
    for i in range(10):
        s.apply(Step(me, i, 100.0 + i * 0.1, 100.1 + i * 0.1))
    snaps = [s.snapshot(now=101.0 + 2.5)]  # step 10 stalled 2.5 s: dumped
    for i in range(10, 13):  # ended before the stop, sent after it
        s.apply(Step(me, i, 101.0 + (i - 10) * 0.1, 101.1 + (i - 10) * 0.1))
    snaps.append(s.snapshot(now=104.0))  # "step 13 stalled 2.7 s": the same stall
    for i in range(13, 16):  # it ran again at 104.0
        s.apply(Step(me, i, 104.0 + (i - 13) * 0.1, 104.1 + (i - 13) * 0.1))
    snaps.append(s.snapshot(now=104.3 + 2.5))  # step 16: a stall of its own
    got = _captures(me, snaps)
    assert [c.step for c in got] == [10, 16], got


JOB = """\
import os, signal, time, torch
torch.set_num_threads(1)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(40):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    time.sleep(0.02)
    if i == 20:
        open("pid", "w").write(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGSTOP)  # line 11: suspended here
print("trained", flush=True)
"""


def test_a_training_stopped_mid_run_is_one_stall_that_says_it_was_stopped(tmp_path: Path):
    """A real training stops itself after step 21 (as ``kill -STOP`` or a scheduler's
    suspend would); resumed once perftop said the stall, it ends well. The stall's stack is
    its line, the process ``stopped``; the hint says so and how to resume it; the report's
    text marks it; one stall, though the steps before the stop came after it."""
    (tmp_path / "job.py").write_text(JOB)
    rec, out = tmp_path / "r.perftop", tmp_path / "out.txt"
    with out.open("w") as stdout:
        mon = subprocess.Popen(
            [sys.executable, "-m", "perftop", "run", "--headless", "--record", str(rec), "--",
             sys.executable, "job.py"],
            cwd=tmp_path, text=True, stdout=stdout, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL)  # fmt: skip
    err: list[str] = []
    said = threading.Event()

    def read() -> None:
        assert mon.stderr is not None
        for line in mon.stderr:
            err.append(line)
            if " stalled " in line and line.rstrip().endswith("stacks captured"):
                said.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert said.wait(60), "".join(err)
        pid = int((tmp_path / "pid").read_text())
        os.kill(pid, signal.SIGCONT)
        mon.wait(timeout=60)
    finally:
        if mon.poll() is None:
            mon.kill()
            if (tmp_path / "pid").exists():  # never leave it stopped
                os.kill(int((tmp_path / "pid").read_text()), signal.SIGKILL)
    reader.join(10)
    assert mon.returncode == 0 and "trained" in out.read_text(), "".join(err)
    # said when seen: a headless run's log has it (its summary's hint says more)
    (line,) = [ln for ln in err if " stalled " in ln]
    assert line.rstrip().endswith(", its process stopped: stacks captured"), line
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    (stall,) = rep["stalls"]
    assert stall["step"] == 21 and stall["pid"] == pid, stall  # (the step after step 21)
    (p,) = stall["processes"]
    assert (p["label"], p["state"]) == ("main", "stopped"), p
    assert (p["frames"][0]["file"].endswith("job.py"), p["frames"][0]["line"]) == (True, 11), p
    (hint,) = [h for h in rep["hints"] if h["id"] == "stalled-step"]
    assert hint["evidence"][0] == (
        f"main (pid {pid}) stood at job.py:11 <module>, stopped (state T: a SIGSTOP, a "
        f"shell's Ctrl-Z or a job scheduler's suspend; kill -CONT {pid} resumes it)"
    ), hint
    text = perftop("report", str(rec), cwd=tmp_path).stdout
    assert f"{'main':<8} {pid:>7}  job.py:11 <module>  [stopped]" in text, text
