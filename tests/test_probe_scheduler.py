"""Jitter-free probe scheduling, lateness, overruns, a failing probe, and --interval."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from perftop.errors import UsageError
from perftop.events import Note, ProbeTick
from perftop.probes import ProbeSource, check_interval


class Slow:
    """Takes a varying time per sample, like a probe on a busy machine."""

    def __init__(self, costs):
        self.costs = list(costs)
        self.at: list[float] = []

    def sample(self, t):
        self.at.append(time.monotonic())
        time.sleep(self.costs[(len(self.at) - 1) % len(self.costs)])
        return []


class Broken:
    def sample(self, t):
        raise RuntimeError("boom")


def run(probes, interval, seconds):
    got = []
    src = ProbeSource(lambda *evs: got.extend(evs), probes, interval).start()
    time.sleep(seconds)
    src.stop()
    return got


def test_ticks_stay_on_the_grid_whatever_each_tick_costs():
    slow = Slow([0.02, 0.12, 0.05])
    got = run([slow], 0.2, 1.55)
    t0 = slow.at[0]
    offsets = [(t - t0) - k * 0.2 for k, t in enumerate(slow.at)]
    assert len(slow.at) >= 7
    assert max(abs(o) for o in offsets) < 0.05, offsets  # sleep(interval) would drift ~0.4s
    ticks = [e for e in got if isinstance(e, ProbeTick)]
    assert len(ticks) == len(slow.at) and all(t.late_s < 0.05 for t in ticks)
    assert all(t.interval_s == 0.2 for t in ticks)


def test_an_overrun_skips_missed_ticks_and_records_them():
    slow = Slow([0.45])
    got = run([slow], 0.2, 1.2)
    ticks = [e for e in got if isinstance(e, ProbeTick)]
    assert ticks and sum(t.missed for t in ticks) >= 2
    gaps = [b - a for a, b in zip(slow.at, slow.at[1:])]
    assert all(g > 0.39 for g in gaps)  # no burst of catch-up ticks


def test_a_failing_probe_is_noted_once_and_the_others_run():
    slow = Slow([0.0])
    got = run([Broken(), slow], 0.2, 0.7)
    assert len(slow.at) >= 3
    notes = [e for e in got if isinstance(e, Note)]
    assert len(notes) == 1 and "boom" in notes[0].text


@pytest.mark.parametrize("bad", [0.1, 0.0, -1.0, float("nan")])
def test_interval_below_the_minimum_is_refused(bad):
    with pytest.raises(UsageError) as e:
        check_interval(bad)
    assert "\n" not in str(e.value) and "0.2" in str(e.value)
    assert check_interval(0.2) == 0.2


def test_cli_refuses_a_short_interval_in_one_line(python):
    out = subprocess.run(
        [python, "-m", "perftop", "run", "--headless", "--no-record", "--interval", "0.1", "true"],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "--interval" in out.stderr


CHILD_LATER = """
import subprocess, sys, time
time.sleep(0.3)
c = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
print(c.pid, flush=True)
time.sleep(30)
"""


def test_a_new_worker_is_sampled_at_once_not_at_the_next_tick() -> None:
    """A worker the model learns of (LoaderInfo, hello) wakes the process probe: a real
    process tree, sampled once by schedule, then again as soon as the worker is known."""
    from perftop.events import ProcSample
    from perftop.model.snapshot import Loader, ProcRow, Snapshot
    from perftop.probes.procs import ProcProbe
    from perftop.probes.scheduler import WorkerWatch

    parent = subprocess.Popen(
        [sys.executable, "-c", CHILD_LATER], stdout=subprocess.PIPE, text=True
    )
    got: list = []
    src = ProbeSource(lambda *evs: got.extend(evs), [ProcProbe(parent.pid)], 60.0).start()
    child = 0
    try:
        child = int(parent.stdout.readline())
        watch = WorkerWatch(src)
        known = (ProcRow(parent.pid),)
        watch(Snapshot(processes=known))  # no workers yet: nothing to do
        ld = Loader(parent.pid, 0, 1, 4, False, 2, False, ((0, child),), "D", time.time())
        with_worker = Snapshot(loaders=(ld,), processes=known)
        t0 = time.monotonic()
        watch(with_worker)

        def sampled() -> bool:
            rows = [r for e in got if isinstance(e, ProcSample) for r in e.rows]
            return any(r[0] == child for r in rows)

        while not sampled() and time.monotonic() - t0 < 5.0:
            time.sleep(0.02)
        assert sampled(), got
        assert time.monotonic() - t0 < 5.0 and src.ticks == 1 and src.extra_samples == 1
        assert sum(isinstance(e, ProbeTick) for e in got) == 1  # the schedule's figures only
        watch(with_worker)  # already known: no second extra sample
        time.sleep(0.3)
        assert src.extra_samples == 1
    finally:
        src.stop()
        parent.kill()
        parent.wait()
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
