"""Recordings made to hurt the reader (issue 43, items 10-12): a compressed frame that
inflates to far more than any writer holds, runs of zeros, frames whose CRC checks around
content no writer makes. Each costs what it touches, in bounded time and memory: the
steps around it are read, `report` says one line and exits 0, or 3 when nothing is left."""

from __future__ import annotations

import json
import resource
import time
import zlib

import pytest

from perftop.events import SessionStart, Step
from perftop.reader import ReadStats
from perftop.recording import read_events
from perftop.wire import HEADER, KIND_JSON, KIND_ZLIB, MAGIC, ZLIB_START, encode_frame
from tests.helpers import perftop


def frame(kind: int, payload: bytes) -> bytes:
    return HEADER.pack(len(payload), zlib.crc32(payload), kind) + payload


def js(items: list) -> bytes:
    return frame(KIND_JSON, json.dumps(items).encode())


HEAD = MAGIC + encode_frame([SessionStart(1.0, ("x",), "/", "h", 1, "0")])
BEFORE = encode_frame([Step(1, i, 1.0 + i, 1.5 + i) for i in range(5)])
AFTER = encode_frame([Step(1, i, 1.0 + i, 1.5 + i) for i in range(5, 10)])

# content whose CRC checks, that no writer of perftop makes
HOSTILE = {
    "deep": frame(KIND_JSON, b"[" * 100_000 + b"]" * 100_000),
    "version": js([["session", 1.0, ["x"], "/", "h", 1, "0", "2"]]),
    "step_strings": js([["step", 1, "7", "a", None]]),
    "step_nulls": js([["step", 1, 7, None, None]]),
    "output_dict": js([["output", 1.0, "stdout", {"a": 1}]]),
    "nan": frame(KIND_JSON, b'[["step",1,9,NaN,1.0]]'),
    "infinity": frame(KIND_JSON, b'[["step",1,9,1.0,Infinity]]'),
    "huge_int": frame(KIND_JSON, b'[["step",1,' + b"9" * 5000 + b",1.0,2.0]]"),
    "int_over_64_bits": js([["step", 1, 2**70, 1.0, 2.0]]),
    "deep_field": js([["step", 1, 9, 1.0, 2.0, 0, 0, 0, {"a": [[[[[[[[[[1]]]]]]]]]]}]]),
    "not_utf8": frame(KIND_JSON, b'[["output",1.0,"stdout","\xff"]]'),
    "empty_frame": frame(KIND_JSON, b""),
}


def _read(path) -> tuple[list[int], ReadStats]:
    stats = ReadStats()
    steps = [e.index for e in read_events(path, stats) if isinstance(e, Step)]
    return steps, stats


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_content_is_one_skipped_frame(tmp_path, name):
    p = tmp_path / f"{name}.perftop"
    p.write_bytes(HEAD + BEFORE + HOSTILE[name] + AFTER)
    steps, stats = _read(p)
    assert steps == list(range(10)), (steps, stats)  # nothing valid lost around it
    assert stats.warnings


def test_report_says_one_line_and_exits_0_or_3(tmp_path):
    p = tmp_path / "some.perftop"
    p.write_bytes(HEAD + BEFORE + HOSTILE["deep"] + HOSTILE["version"] + AFTER)
    r = perftop("report", "--json", str(p), cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert json.loads(r.stdout)["steps"]["count"] == 10
    assert len(r.stderr.strip().splitlines()) == 1 and "warning" in r.stderr
    nothing = tmp_path / "none.perftop"
    nothing.write_bytes(MAGIC + HOSTILE["version"] + HOSTILE["empty_frame"])
    for cmd in (("report",), ("export", "--csv", str(tmp_path / "x.csv"))):
        r = perftop(*cmd, str(nothing), cwd=tmp_path)
        assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_deflate_bomb_is_damage_not_memory(tmp_path):
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(1 << 24)
    body = b"".join(deflate.compress(chunk) for _ in range(16)) + deflate.flush(zlib.Z_SYNC_FLUSH)
    p = tmp_path / "bomb.perftop"  # 256 MiB inflated, from 256 KB
    p.write_bytes(HEAD + BEFORE + frame(KIND_ZLIB, bytes((ZLIB_START,)) + body) + AFTER)
    peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    steps, stats = _read(p)
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak0) * 1024
    assert steps == list(range(10)) and stats.damaged == 1
    assert grew < 64 << 20, grew  # bounded by the writer's most, not by the bomb


def test_zero_runs_are_not_frames_and_are_skipped_at_disk_speed(tmp_path):
    p = tmp_path / "tail.perftop"
    p.write_bytes(HEAD + BEFORE + AFTER + bytes(64 << 20))  # a crash's zero tail
    t = time.monotonic()
    steps, stats = _read(p)
    assert time.monotonic() - t < 5
    assert steps == list(range(10)) and stats.skipped_bytes == 64 << 20
    mid = tmp_path / "mid.perftop"
    mid.write_bytes(HEAD + BEFORE + bytes(16 << 20) + AFTER)
    steps, stats = _read(mid)
    assert steps == list(range(10)) and stats.damaged == 1
    zeros = tmp_path / "zeros.perftop"
    zeros.write_bytes(MAGIC + bytes(64 << 20))
    t = time.monotonic()
    r = perftop("report", str(zeros), cwd=tmp_path)
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    assert time.monotonic() - t < 15
