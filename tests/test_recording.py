"""Recording files: flushed while written, readable after damage, clear errors."""

from __future__ import annotations

import json
import os
import signal
import stat
import time

import pytest

from perftop.errors import RecordingError
from perftop.events import Note, SessionStart, Step
from perftop.recording import ReadStats, RecordingWriter, read_events
from perftop.wire import HEADER, KIND_ZLIB, MAGIC
from tests.helpers import perftop, spawn_slow_job


def _write(path, n=10, compress=True):
    w = RecordingWriter(path, compress=compress)
    w.write_events([SessionStart(1.0, ("x",), "/", "h", 1, "0")])
    for i in range(n):
        w.write_events([Step(2, i, float(i), i + 0.5)])
        w.tick(time.monotonic() + 1.0 + i)  # one flush per step, as at 2 steps/s
    w.close()


def test_round_trip(tmp_path):
    p = tmp_path / "a.perftop"
    _write(p)
    stats = ReadStats()
    events = list(read_events(p, stats))
    assert len(events) == 11 and stats.warnings == [] and stats.frames == 11


def test_refuses_to_overwrite_without_force(tmp_path):
    p = tmp_path / "a.perftop"
    _write(p)
    with pytest.raises(RecordingError, match="already exists"):
        RecordingWriter(p)
    RecordingWriter(p, force=True).close()


def test_a_recording_is_readable_by_its_owner_only(tmp_path):
    """It holds the job's command line and output: 0600 under a umask of 022, and an old
    file overwritten with --force gets the same mode."""
    old = os.umask(0o022)
    try:
        p = tmp_path / "r.perftop"
        RecordingWriter(p).close()
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
        q = tmp_path / "old.perftop"
        q.write_bytes(b"x")
        q.chmod(0o644)
        RecordingWriter(q, force=True).close()
        assert stat.S_IMODE(q.stat().st_mode) == 0o600
        assert list(read_events(q)) == []  # a recording now, not the old bytes
    finally:
        os.umask(old)


def test_truncated_tail_is_skipped_with_a_warning(tmp_path):
    p = tmp_path / "a.perftop"
    _write(p)
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 7)
    stats = ReadStats()
    events = list(read_events(p, stats))
    assert len(events) == 10
    assert any("truncated tail" in w for w in stats.warnings)


def test_damaged_middle_frame_is_skipped_uncompressed(tmp_path):
    p = tmp_path / "a.perftop"
    _write(p, compress=False)
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    stats = ReadStats()
    assert len(list(read_events(p, stats))) == 10
    assert stats.damaged == 1 and stats.skipped_bytes > 0


def test_flushed_within_a_second_while_writing(tmp_path):
    p = tmp_path / "a.perftop"
    w = RecordingWriter(p)
    w.write_events([Note(1.0, "info", "t", "x")])
    w.tick(time.monotonic() + 1.0)
    assert len(list(read_events(p))) == 1  # readable while the writer is still open
    w.close()


def test_damage_in_a_compressed_stream_costs_only_the_rest_of_its_segment(tmp_path):
    """A flipped byte: what came before it reads, the stream resumes at its next restart."""
    p = tmp_path / "a.perftop"
    w = RecordingWriter(p)
    w.write_events([SessionStart(1.0, ("x",), "/", "h", 1, "0")])
    for i in range(60):  # incompressible output: segments of 64 KiB restart every few
        w.write_events([Note(float(i), "info", "t", os.urandom(6000).hex())])
        w.tick(time.monotonic() + 1.0 + i)
    w.close()
    data = bytearray(p.read_bytes())
    # The byte in the middle of the compressed frame a third of the way in.
    pos, frames = len(MAGIC), []
    while pos < len(data):
        length, _crc, kind = HEADER.unpack_from(data, pos)
        frames.append((pos + HEADER.size, length, kind))
        pos += HEADER.size + length
    at, length, _ = next(f for f in frames if f[2] == KIND_ZLIB and sum(f[:2]) > len(data) // 3)
    data[at + length // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    stats = ReadStats()
    events = list(read_events(p, stats))
    assert 30 < len(events) < 61 and stats.damaged == 1
    assert events[-1].t == 59.0  # read on to the end after the damage
    assert any("damaged" in w for w in stats.warnings)


@pytest.mark.parametrize("content", [b"", b"hello world, not a recording", b"PERFTOP\x00"])
def test_report_on_bad_files_is_one_line(tmp_path, content):
    p = tmp_path / "bad.perftop"
    p.write_bytes(content)
    r = perftop("report", str(p), cwd=tmp_path)
    assert r.returncode == 3
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(p) in r.stderr


def test_report_on_missing_file(tmp_path):
    r = perftop("report", "--json", "nope.perftop", cwd=tmp_path)
    assert r.returncode == 3 and "nope.perftop" in r.stderr and "Traceback" not in r.stderr


def test_monitor_killed_keeps_recording_and_training(tmp_path):
    """kill -9 of the monitor: the job trains on, what was recorded stays readable."""
    rec = tmp_path / "r.perftop"
    mon = spawn_slow_job(tmp_path, "--record", str(rec), start_new_session=True)
    time.sleep(2.5)
    mon.kill()  # the monitor dies; the job (its child) keeps its stdout pipe
    mon.wait()
    # The job is still training: it keeps printing steps after the monitor is gone.
    deadline = time.time() + 10
    seen = []
    while time.time() < deadline and len(seen) < 2:
        line = mon.stdout.readline()
        if line.startswith("step"):
            seen.append(line)
    os.killpg(mon.pid, signal.SIGTERM)
    assert len(seen) == 2
    r = perftop("report", "--json", str(rec), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["steps"]["count"] >= 20  # ~1.5 s of 10 ms steps survived (flushed each 0.5 s)
    assert rep["exit_code"] is None
