"""The monitor's own cost: work nobody sees is not done, and costly reads are paced.

USS/PSS (``memory_full_info``, a page-table walk) is read again only when its cost allows;
a cheap process is still read at every tick.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from perftop.events import ProcSample
from perftop.probes.platform import platform_caps
from perftop.probes.procs import ProcProbe

GROW = """
import sys
print("ready", flush=True)
blocks = []
for line in sys.stdin:
    blocks.append(bytearray(64 * 1024 * 1024))
    for i in range(0, len(blocks[-1]), 4096):
        blocks[-1][i] = 1
    print("grown", flush=True)
"""

needs_uss = pytest.mark.skipif(not platform_caps().uss, reason="no USS on this OS")


def _uss(probe: ProcProbe, pid: int) -> int:
    (sample,) = [e for e in probe.sample(time.time()) if isinstance(e, ProcSample)]
    (row,) = [r for r in sample.rows if r[0] == pid]
    return row[8]  # uss


@pytest.fixture
def grower():
    proc = subprocess.Popen(
        [sys.executable, "-c", GROW], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline() == "ready\n"

    def grow() -> None:
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "grown\n"

    yield proc, grow
    proc.kill()
    proc.wait()


@needs_uss
def test_uss_of_a_process_dear_to_read_is_paced(grower):
    """Over its budget, a process's USS is the last read's until its period has passed;
    once it rose fast over two reads in a row, at every tick (a worker's copy-on-write
    growth)."""
    proc, grow = grower
    probe = ProcProbe(proc.pid, mem_budget=1e-9, mem_max_age_s=1.0)
    before = _uss(probe, proc.pid)
    grow()
    assert _uss(probe, proc.pid) == before  # not read again: the last figure
    time.sleep(1.0)
    grown = _uss(probe, proc.pid)
    assert grown > before + 50 * 2**20  # its period passed: read again
    grow()
    assert _uss(probe, proc.pid) == grown  # one rise: still paced
    time.sleep(1.0)
    grown = _uss(probe, proc.pid)  # the second rise in a row
    grow()
    assert _uss(probe, proc.pid) > grown + 50 * 2**20  # growing: read at every tick


@needs_uss
def test_uss_of_a_cheap_process_is_read_at_every_tick(grower):
    proc, grow = grower
    probe = ProcProbe(proc.pid)
    before = _uss(probe, proc.pid)
    grow()
    time.sleep(0.2)  # a tick apart (the probe refuses intervals under 0.2 s)
    assert _uss(probe, proc.pid) > before + 50 * 2**20


FORKER = (
    """
import os, sys
child = os.fork()
if child:
    os.waitpid(child, 0)
    sys.exit(0)
"""
    + GROW
)


@needs_uss
def test_uss_of_a_fork_of_its_parent_is_read_at_every_tick_dear_or_not():
    """A DataLoader worker's copy-on-write growth gets 1 s samples from its second tick (its
    first read waits a tick: an HF evaluation's workers, gone within a second, cost no
    read), however dear its reads (the worker-memory hint fits a line through them)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", FORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline() == "ready\n"
    (child,) = psutil.Process(proc.pid).children()
    try:
        probe = ProcProbe(proc.pid, mem_budget=1e-9, mem_max_age_s=30.0)
        assert _uss(probe, child.pid) is None  # first read a tick after it was seen
        assert _uss(probe, proc.pid) is not None  # (its parent, no fork of its own: at once)
        time.sleep(1.0)
        before = _uss(probe, child.pid)
        assert before is not None
        for _ in range(2):
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.stdout.readline() == "grown\n"
            grown = _uss(probe, child.pid)
            assert grown > before + 50 * 2**20  # read at once, not paced to 30 s
            before = grown
    finally:
        child.kill()
        proc.kill()
        proc.wait()


@needs_uss
def test_uss_of_a_flat_fork_is_read_every_few_ticks_until_it_rises(monkeypatch):
    """Past its first seconds, a worker whose USS stays flat is read every MEM_FORK_FLAT_S,
    not at every tick (a torch worker's read is ~1% of a core a second); once a read rises
    fast, at every tick again."""
    from perftop.probes import procs

    monkeypatch.setattr(procs, "MEM_FORK_FIRST_S", 0.0)
    monkeypatch.setattr(procs, "MEM_FORK_FLAT_S", 1.0)
    monkeypatch.setattr(procs, "MEM_FORK_DEFER_S", 0.0)
    proc = subprocess.Popen(
        [sys.executable, "-c", FORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline() == "ready\n"
    (child,) = psutil.Process(proc.pid).children()

    def grow() -> None:
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "grown\n"

    try:
        probe = ProcProbe(proc.pid, mem_budget=1e-9, mem_max_age_s=30.0)
        before = _uss(probe, child.pid)
        grow()
        assert _uss(probe, child.pid) == before  # flat so far: its last figure
        time.sleep(1.0)
        grown = _uss(probe, child.pid)
        assert grown > before + 50 * 2**20  # MEM_FORK_FLAT_S passed: read again, risen
        grow()
        assert _uss(probe, child.pid) > grown + 50 * 2**20  # rising: at every tick
    finally:
        child.kill()
        proc.kill()
        proc.wait()


def test_the_job_waiting_for_input_is_found_without_reading_every_process_of_the_host():
    """The TUI asks once a second whether the job reads its stdin: the job's tree comes
    from /proc/PID/task/TID/children (psutil's children() reads every process of the
    host: ~5 ms a second on the app's thread of a busy machine)."""
    from unittest import mock

    from perftop.monitor.jobinput import JobInput

    nested = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'input()'])"
    proc = subprocess.Popen(
        [sys.executable, "-c", nested], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdin is not None
    job_input = JobInput(proc.stdin, proc.pid)
    try:
        with mock.patch.object(psutil.Process, "children", side_effect=AssertionError):
            deadline = time.monotonic() + 20
            while not job_input.reading():  # its grandchild blocks in input()
                assert time.monotonic() < deadline, "the read was not seen"
                time.sleep(0.05)
    finally:
        job_input.close()
        proc.wait(10)
