"""Leaving a job running: a detached recorder takes the socket and the recording over."""

from __future__ import annotations

import os
import signal
import sys
import time

from perftop.monitor.background import alive
from perftop.monitor.runner import Job, RunConfig
from perftop.report.build import session_from_file
from tests.helpers import WORKLOADS


def test_hand_over_keeps_recording_until_the_job_ends(tmp_path):
    rec = tmp_path / "r.perftop"
    cfg = RunConfig((sys.executable, str(WORKLOADS / "slow_steps.py")), record=rec,
                    capture_output=True)  # fmt: skip
    job = Job(cfg).start()
    time.sleep(2.0)
    bg = job.hand_over()
    before = job.session.snapshot().steps.count  # the ingest thread has stopped: safe to read
    assert bg is not None and job.poll() is None  # the job goes on
    handed_at = time.time()
    time.sleep(2.5)  # the hook reconnects to the background recorder and keeps sending
    os.killpg(job.pid, signal.SIGTERM)
    deadline = time.time() + 20
    while alive(bg) and time.time() < deadline:
        time.sleep(0.1)
    assert not alive(bg)  # it noticed the job's end and exited
    snap = session_from_file(str(rec)).snapshot(window=None)
    assert snap.steps.count > before
    assert snap.steps.recent[-1].t1 > handed_at + 1.0  # steps recorded after the hand-over
    assert snap.meta.ended and snap.meta.exit_code is None
    assert snap.meta.state == "ended (exit code unknown)"
