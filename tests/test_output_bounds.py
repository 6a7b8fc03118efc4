"""A job's output never makes perftop's recording unreadable nor its memory or disk grow
without bound (issue 43, items 3 and 4): a real job prints a 20 MB line between its steps,
then floods its stdout, with its output captured as under the TUI."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import psutil
import pytest

from perftop.events import Dropped, Output
from perftop.monitor import outrate
from perftop.monitor.hub import Hub
from perftop.monitor.jobenv import RunConfig
from perftop.monitor.runner import Job
from perftop.recording import read_events
from perftop.wire import MAX_FRAME, Frame, encode_frame, fitted_frames
from tests.helpers import WORKLOADS, perftop

FLOOD_S = 2.0
FLOODING = 64 << 20  # left out: only the flood leaves out this much (its big line, 20 MB)


@pytest.fixture(scope="module")
def loud(tmp_path_factory):
    where = tmp_path_factory.mktemp("loud")
    rec = where / "r.perftop"
    cmd = (sys.executable, str(WORKLOADS / "loud_steps.py"), str(FLOOD_S))
    job = Job(RunConfig(command=cmd, record=rec, capture_output=True))
    me = psutil.Process()
    rss0 = me.memory_info().rss
    peak = {"rss": rss0}
    flood: list[int] = []  # the files' disk use, sampled while the job floods

    def sample() -> None:
        while job.exit_code is None:
            peak["rss"] = max(peak["rss"], me.memory_info().rss)
            out = job.output
            if out is not None and out.left_out > FLOODING:
                try:
                    flood.append(sum(os.stat(p).st_blocks * 512 for p in out.paths.values()))
                except OSError:
                    pass
            time.sleep(0.05)

    job.start()
    threading.Thread(target=sample, daemon=True).start()
    code = job.wait()
    assert job.output is not None
    return rec, code, job.output.left_out, peak["rss"] - rss0, flood, where


def test_a_20mb_line_leaves_every_step_readable(loud):
    rec, code, left_out, _rss, _disk, where = loud
    assert code == 0
    r = perftop("report", "--json", str(rec), cwd=where)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    assert json.loads(r.stdout)["steps"]["count"] == 20  # none lost around the big line
    outs = [e for e in read_events(rec) if isinstance(e, Output)]
    assert max(len(e.text.encode()) for e in outs) <= outrate.EVENT_MAX
    markers = [e.text for e in outs if e.text.startswith("[perftop: ")]
    assert markers and sum(int(m.split()[1]) for m in markers) == left_out > 0
    assert any("done" in e.text.splitlines() for e in outs)  # its last line, after the flood


def test_a_flood_keeps_memory_and_disk_bounded_and_the_exit_clean(loud):
    rec, code, left_out, rss_growth, flood, _where = loud
    assert code == 0  # a clean exit stays clean after a flood
    assert left_out > 50 * outrate.RATE  # the job printed far more than was kept
    assert rss_growth < 400 << 20, rss_growth
    # The files hold what the job wrote since the reader's last turn (~20 ms of a flood
    # at 2 GB/s), not what it wrote in all; a loaded machine that starves the reader for
    # a while makes a peak, which is freed at its next turn. Kept whole, the files would
    # grow to ``left_out``: their median over the flood would be near half of it.
    assert len(flood) >= 5, flood
    assert sorted(flood)[len(flood) // 2] < 256 << 20, flood
    assert max(flood) < left_out // 2, (flood, left_out)
    assert rec.stat().st_size < 40 << 20  # the rate's bytes at most, compressed


def test_no_fitted_frame_is_over_the_limit_and_one_too_big_event_is_left_out():
    small = [Output(0.0, "stdout", "x" * (100 << 10)) for _ in range(100)]
    big = Output(0.0, "stdout", "y" * (5 << 20))
    frames, left_out = fitted_frames([*small, big], limit=1 << 20)
    assert left_out == 1 and len(frames) >= 10
    assert all(len(f.payload) <= 1 << 20 for f in frames)
    assert sum(len(json.loads(f.payload)) for f in frames) == 100


def test_a_viewers_dropped_frames_are_said_in_the_stream():
    hub = Hub()
    stuck = threading.Event()

    class Slow:
        def write_frame(self, frame: Frame) -> None:
            stuck.wait(10)

        def write_events(self, events) -> None:
            pass

        def tick(self, now: float) -> None:
            pass

        def close(self) -> None:
            pass

    hub.start()
    hub.subscribe(Slow())
    payload = encode_frame([Output(0.0, "stdout", "z" * (MAX_FRAME // 4))])[12:]
    for _ in range(8):
        hub.submit_frame(Frame(0, payload), [])
        time.sleep(0.05)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not hub.session.snapshot().meta.dropped_events:
        time.sleep(0.1)
    stuck.set()
    hub.stop()
    assert hub.session.snapshot().meta.dropped_events > 0
    assert any(isinstance(ev, Dropped) for ev in hub.header.events())
