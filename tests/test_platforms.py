"""What `perftop run` shows off Linux: what psutil gives there, N/A for the rest, said once.

The platform is faked at its one boundary, ``platform_caps(system)``; the probes then read
real processes through real psutil, as they would on that OS.
"""

from __future__ import annotations

import os
import subprocess
import time

import psutil
import pytest

from perftop.events import HostSample, Note, ProcSample
from perftop.events.probes import proc_row
from perftop.probes.host import HostProbe
from perftop.probes.platform import platform_caps
from perftop.probes.procread import descendants
from perftop.probes.procs import ProcProbe

MAC = platform_caps("darwin")
ALLOC = "import time\nb = bytearray(30 * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(4)"


@pytest.fixture
def child(python):
    proc = subprocess.Popen([python, "-c", ALLOC])
    time.sleep(0.5)
    yield proc
    proc.kill()
    proc.wait()


def _rows(events) -> dict[int, dict]:
    (sample,) = [e for e in events if isinstance(e, ProcSample)]
    return {r[0]: proc_row(r) for r in sample.rows}


def test_linux_has_every_figure_and_nothing_to_say():
    caps = platform_caps("linux")
    assert caps.core_placement and caps.uss and caps.pss and caps.iowait and not caps.note
    assert platform_caps() == caps  # this suite runs on Linux


def test_macos_processes_show_what_psutil_gives_and_say_the_rest_once(child):
    probe = ProcProbe(os.getpid(), MAC)
    first = probe.sample(time.time())
    notes = [e for e in first if isinstance(e, Note)]
    assert len(notes) == 1 and notes[0].level == "warning"
    assert "per-core placement" in notes[0].text and "PSS" in notes[0].text
    time.sleep(0.3)
    later = probe.sample(time.time())
    assert not [e for e in later if isinstance(e, Note)]  # said once
    rows = _rows(later)
    assert child.pid in rows and os.getpid() in rows  # the panel is not empty
    r = rows[child.pid]
    assert r["cpu_core"] is None and r["pss"] is None and r["swap"] is None
    assert r["uss"] > 28 * 2**20 and r["rss"] >= r["uss"]  # psutil gives USS on macOS
    assert r["cpu_percent"] is not None and r["threads"] >= 1


def test_other_os_without_uss_shows_na_not_zero(child):
    rows = _rows(ProcProbe(child.pid, platform_caps("sunos5")).sample(time.time()))
    assert rows[child.pid]["uss"] is None and rows[child.pid]["rss"] > 28 * 2**20


def test_cpu_num_raising_does_not_empty_the_processes(child, monkeypatch):
    """psutil has no Process.cpu_num() on macOS: each call raises AttributeError."""

    def missing(self):
        raise AttributeError("'Process' object has no attribute 'cpu_num'")

    monkeypatch.setattr(psutil.Process, "cpu_num", missing)
    rows = _rows(ProcProbe(child.pid).sample(time.time()))
    assert rows[child.pid]["cpu_core"] is None and rows[child.pid]["uss"] > 28 * 2**20


def test_descendants_without_proc_children_use_psutil(python, child):
    assert sorted(descendants(os.getpid(), MAC)) == sorted(descendants(os.getpid()))
    assert child.pid in descendants(os.getpid(), MAC)


def test_macos_host_has_no_iowait_rather_than_zero():
    probe = HostProbe(MAC)
    probe.sample(time.time())
    time.sleep(0.3)
    (h,) = probe.sample(time.time())
    assert isinstance(h, HostSample) and h.cpu_percent is not None
    assert h.iowait_percent is None


def test_a_zombie_job_is_not_alive_and_psutil_says_so(python):
    from perftop.probes.alive import alive

    proc = subprocess.Popen([python, "-c", "pass"])
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert not alive(proc.pid)  # exited, not yet reaped
    proc.wait()
    assert not alive(proc.pid) and alive(os.getpid())


def test_monitor_own_rss_comes_from_psutil():
    from perftop.monitor.hub import _rss

    ours = psutil.Process().memory_info().rss
    assert abs(_rss() - ours) < 0.2 * ours
