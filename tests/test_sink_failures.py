"""A sink that fails (a full recording disk, a viewer's bug, a snapshot subscriber that
raises) is cut off with one line; the hub, the session and the job go on to the end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from perftop.events import Hello, Note, SessionStart, Step
from perftop.monitor.hub import Hub
from perftop.recording import RecordingWriter
from tests.helpers import WORKLOADS, perftop

STEPS = 20000


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory):
    """A 256 KiB tmpfs, filled but for 64 KiB: a recording of a few thousand steps fills it."""
    where = tmp_path_factory.mktemp("disk")
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], check=True)
    try:
        (where / "filler").write_bytes(b"\0" * (192 << 10))
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture(scope="module")
def full_disk_run(small_disk, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("run")
    rec = small_disk / "r.perftop"
    proc = perftop(
        "run", "--headless", "--record", str(rec), "--",
        sys.executable, str(WORKLOADS / "many_steps.py"), str(STEPS),
        cwd=cwd, timeout=240,
    )  # fmt: skip
    return proc, rec, cwd


def test_a_full_recording_disk_leaves_the_job_and_the_session_running(full_disk_run):
    proc, rec, _ = full_disk_run
    assert proc.returncode == 0, proc.stderr
    assert f"steps {STEPS}" in proc.stdout  # the job ran to its end
    assert "Traceback" not in proc.stderr and "Errno" not in proc.stderr, proc.stderr
    stopped = [ln for ln in proc.stderr.splitlines() if "recording stopped" in ln]
    assert len(stopped) == 1, proc.stderr
    assert "(disk full)" in stopped[0] and str(rec) in stopped[0]
    # the session went on: the job's exit and every step are in the summary
    assert "perftop: exited (0)" in proc.stderr
    at = int(re.search(r"recording stopped at step (\d+)", stopped[0]).group(1))
    counted = int(re.search(r"perftop: (\d+) steps", proc.stderr).group(1))
    assert at < counted
    if "events dropped" not in proc.stderr:  # a hook under a loaded host may drop, counted
        assert counted == STEPS
    assert f"recorded to {rec} until it stopped" in proc.stderr


def test_the_report_reads_what_the_full_disk_kept(full_disk_run):
    _, rec, cwd = full_disk_run
    rep = perftop("report", "--json", str(rec), cwd=cwd)
    assert rep.returncode == 0, rep.stderr
    steps = json.loads(rep.stdout)["steps"]["count"]
    assert 0 < steps < STEPS
    text = perftop("report", str(rec), cwd=cwd).stdout  # why it has no end: one of these
    assert "no end recorded (" in text and "the recording stopped early" in text, text


@pytest.mark.parametrize("what", ["--chrome-trace", "--csv"])
def test_an_export_onto_a_full_disk_names_the_file_and_leaves_nothing(full_disk_run, what):
    _, rec, cwd = full_disk_run
    out = rec.parent / ("t.json" if what == "--chrome-trace" else "csv")
    before = sorted(p.name for p in rec.parent.iterdir())
    r = perftop("export", str(rec), what, str(out), cwd=cwd)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    err = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert len(err) == 1 and "No space left on device" in err[0], r.stderr
    assert err[0].startswith(f"perftop: error: {out}")  # the file it could not write
    assert sorted(p.name for p in rec.parent.iterdir()) == before  # no partial output


def _hub_with_steps(n: int, on_problem) -> Hub:
    hub = Hub(refresh_s=0.05, on_problem=on_problem).start()
    start = SessionStart(1.0, ("x",), "/", "h", 1, "0", record_path="x.perftop")
    hub.submit(start, Hello(1.0, 7, 1, "h", ("x",)))
    hub.submit(*[Step(7, i, 1.0 + i, 1.5 + i, 0.0) for i in range(n)])
    return hub


def test_a_recording_cut_off_says_so_once_and_turns_rec_off(full_disk_run):
    _, rec, _ = full_disk_run  # its disk is full
    lines: list[str] = []
    hub = _hub_with_steps(3, lines.append)
    w = RecordingWriter(rec.parent / "second.perftop")
    hub.subscribe(w, buffered=False, record_path=str(w.path))
    deadline = time.monotonic() + 20
    k = 0
    while not lines and time.monotonic() < deadline:
        hub.submit(Step(7, 3 + k, 10.0 + k, 10.5 + k, 0.0))
        k += 1
        time.sleep(0.05)
    hub.stop()
    assert len(lines) == 1 and lines[0].startswith("recording stopped at step "), lines
    assert f"(disk full): {w.path}" in lines[0] and w.closed and w.error
    meta = hub.session.snapshot(window=None).meta
    assert meta.record_path == ""  # the header's `rec` goes off


class Raising:
    """A sink whose every write fails (a bug, a dead disk)."""

    def __init__(self) -> None:
        self.writes = 0
        self.closed = False

    def write_frame(self, frame) -> None:
        self.writes += 1
        if self.writes > 2:
            raise ValueError("broken sink")

    def write_events(self, events) -> None: ...

    def tick(self, now: float) -> None: ...

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("buffered", [False, True])
def test_a_sink_that_raises_is_cut_off_with_one_line(buffered):
    lines: list[str] = []
    hub = _hub_with_steps(5, lines.append)
    bad = Raising()
    hub.subscribe(bad, buffered=buffered)
    for k in range(20):
        hub.submit(Step(7, 5 + k, 10.0 + k, 10.5 + k, 0.0))
    deadline = time.monotonic() + 20
    while not lines and time.monotonic() < deadline:
        time.sleep(0.02)
        hub.submit(Step(7, 100, 200.0, 200.5, 0.0))
    hub.submit(Step(7, 101, 201.0, 201.5, 0.0))
    hub.stop()
    assert len(lines) == 1 and "Raising" in lines[0] and "broken sink" in lines[0], lines
    assert bad.closed and hub.sinks == 0
    snap = hub.session.snapshot(window=None)
    assert snap.steps.count >= 26  # every step after the cut was applied too
    assert any(n.level == "error" and "broken sink" in n.text for n in snap.notes)


def test_a_snapshot_subscriber_that_raises_is_cut_off_with_one_line():
    lines: list[str] = []
    calls: list[int] = []

    def bad(snap) -> None:
        calls.append(1)
        raise RuntimeError("screen gone")

    hub = Hub(refresh_s=0.02, on_problem=lines.append)
    hub.snapshot_subscribers.append(bad)
    hub.start()
    deadline = time.monotonic() + 20
    while not lines and time.monotonic() < deadline:
        time.sleep(0.02)
    hub.submit(Note(1.0, "info", "t", "after"))
    time.sleep(0.2)
    hub.stop()
    assert len(lines) == 1 and "screen gone" in lines[0] and len(calls) == 1
