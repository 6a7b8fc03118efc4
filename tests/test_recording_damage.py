"""A damaged byte costs what it touches: readers resynchronise at the next frame whose CRC
checks and say how many bytes and steps they skipped (a real recording, real damage)."""

from __future__ import annotations

import json
import os
import random
import sys

import pytest

from perftop.reader import ReadStats
from perftop.recording import finish_stats, read_events
from perftop.replay.index import ReplayIndex
from perftop.wire import HEADER, KIND_ZLIB, MAGIC, ZLIB_START
from tests.helpers import WORKLOADS, perftop

STEPS = 3000  # over ~5 s (a pause each step): the hook's batches make many frames


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    where = tmp_path_factory.mktemp("damage")
    rec = where / "r.perftop"
    r = perftop(
        "run", "--headless", "--record", str(rec), "--",
        sys.executable, str(WORKLOADS / "many_steps.py"), str(STEPS), "0.0015",
        cwd=where, timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return rec


def _frames(data: bytes) -> list[tuple[int, int]]:
    """(offset, payload length) of each outer frame."""
    pos, out = len(MAGIC), []
    while pos < len(data):
        length, _crc, _kind = HEADER.unpack_from(data, pos)
        out.append((pos, length))
        pos += HEADER.size + length
    return out


def _steps(path) -> tuple[list, ReadStats]:
    stats = ReadStats()
    return [e for e in read_events(path, stats) if type(e).__name__ == "Step"], stats


def _streams(raw: bytes, frames: list[tuple[int, int]]) -> list[int]:
    """Each frame's deflate stream, as the frame where it starts (``ZLIB_START``, every
    ``SEGMENT_BYTES`` of input: recording.py)."""
    stream, streams = -1, []
    for i, (at, _length) in enumerate(frames):
        if HEADER.unpack_from(raw, at)[2] != KIND_ZLIB or raw[at + HEADER.size] & ZLIB_START:
            stream = i
        streams.append(stream)
    return streams


def _frame_steps(recording, frames: list[tuple[int, int]], tmp) -> list[set[tuple[int, int]]]:
    """Each frame's steps (pid, index): what reading it adds."""
    raw = recording.read_bytes()
    per_frame, before = [], set()
    for i, (at, length) in enumerate(frames):
        upto = tmp / f"upto{i}.perftop"
        upto.write_bytes(raw[: at + HEADER.size + length])
        now = {(e.pid, e.index) for e in _steps(upto)[0]}
        per_frame.append(now - before)
        before = now
    assert sum(map(len, per_frame)) == len(before)  # each frame's steps all told
    return per_frame


def _untouched(recording, frames: list[tuple[int, int]], damaged, tmp) -> set[tuple[int, int]]:
    """The steps (pid, index) of the frames that damage to the frames ``damaged`` leaves
    whole. A damaged byte breaks its deflate stream up to the stream's next restart, so it
    costs its frame and the rest of that stream (a loaded host's hook packs more steps a
    frame: 1,955 of 3,000 steps once)."""
    streams = _streams(recording.read_bytes(), frames)
    per_frame = _frame_steps(recording, frames, tmp)
    cut = set()
    for d in damaged:
        cut |= {k for k in range(d, len(frames)) if streams[k] == streams[d]}
    return set().union(*(f for k, f in enumerate(per_frame) if k not in cut))


def _report(path) -> tuple[dict, str]:
    r = perftop("report", "--json", str(path), cwd=path.parent)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout), r.stderr


def test_flipped_bytes_in_three_places_lose_only_what_they_touch(recording, tmp_path):
    data = bytearray(recording.read_bytes())
    frames = _frames(data)
    assert len(frames) >= 8, "too few frames to damage apart"
    whole, stats0 = _steps(recording)
    assert len(whole) > STEPS // 2 and not stats0.warnings  # a loaded host's hook may drop
    # Three places before the deflate stream that holds the last step: a damage in it costs
    # the rest of the recording's steps, as no restart follows (the random flips below test
    # that; a last stream of the exit's events alone once followed it: 519 steps "lost").
    # Each is found by its frame's CRC, whether or not an earlier damage broke its stream.
    k = max(i for i, f in enumerate(_frame_steps(recording, frames, tmp_path))
            if (whole[-1].pid, whole[-1].index) in f)  # fmt: skip
    last = _streams(data, frames)[k]  # the first frame of the stream of the last step
    damaged = (0, len(frames) // 3, min(2 * len(frames) // 3, last - 1))
    assert damaged[0] < damaged[1] < damaged[2] < last, ("too few streams", last, len(frames))
    data[len(MAGIC) + 1] ^= 0x40  # the first frame's length: over the limit
    at, _ = frames[damaged[1]]
    data[at + 2] ^= 0x01  # a length field in the middle: plausible, and wrong
    at, length = frames[damaged[2]]
    data[at + HEADER.size + length // 2] ^= 0xFF  # inside a compressed payload
    bad = tmp_path / "bad.perftop"
    bad.write_bytes(bytes(data))

    steps, stats = _steps(bad)
    lost = len(whole) - len(steps)
    got = {(e.pid, e.index) for e in steps}
    assert lost > 0 and _untouched(recording, frames, damaged, tmp_path) <= got
    assert steps[-1].index == whole[-1].index  # read on to the end after each damage
    assert stats.damaged == 3 and stats.skipped_steps == lost
    rep, err = _report(bad)
    assert rep["steps"]["count"] == len(steps)
    said = [w for w in rep["warnings"] if "damaged bytes" in w]
    assert len(said) == 1 and "at 3 place(s)" in said[0] and f"{lost} steps" in said[0], said
    assert f"skipped {stats.skipped_bytes} damaged bytes" in err  # the text report says it too

    index = ReplayIndex(bad)  # what `perftop replay` reads and shows
    index.build()
    assert index.steps == len(steps) and index.warnings() == stats.warnings


def test_noise_between_frames_is_skipped_to_the_byte(recording, tmp_path):
    data = recording.read_bytes()
    at, _ = _frames(data)[4]
    noise = os.urandom(1000)
    bad = tmp_path / "noise.perftop"
    bad.write_bytes(data[:at] + noise + data[at:])
    steps, stats = _steps(bad)
    assert len(steps) == len(_steps(recording)[0])
    assert stats.damaged == 1 and stats.skipped_bytes == len(noise) and stats.skipped_steps == 0


def test_random_flipped_bits_are_counted_to_the_step(recording, tmp_path):
    """Wherever bits flip (headers, compressed data, inner frames), the steps said to be
    skipped are the steps missing; "at least" where damage came after a process's last
    step read (nothing later tells how many it lost)."""
    data = recording.read_bytes()
    total = len({s.index for s in _steps(recording)[0]})
    rng = random.Random(28)
    bad = tmp_path / "flips.perftop"
    for _ in range(40):
        d = bytearray(data)
        for _ in range(rng.choice((1, 2, 3))):
            d[rng.randrange(len(MAGIC), len(d))] ^= 1 << rng.randrange(8)
        bad.write_bytes(bytes(d))
        steps, stats = _steps(bad)
        lost = total - len({s.index for s in steps})
        if stats.steps_uncounted:
            said = "at least" if stats.skipped_steps else "an unknown number of steps"
            assert stats.skipped_steps <= lost and any(said in w for w in stats.warnings)
            assert not any("at least 0 " in w for w in stats.warnings)
        else:
            assert stats.skipped_steps == lost, stats.warnings


@pytest.mark.parametrize("kind", [0, 3, 6])
def test_a_flipped_frame_kind_counts_the_steps_it_held(recording, tmp_path, kind):
    """The header's kind is outside the CRC: a compressed frame whose kind reads as JSON, a
    node's frame or an unknown kind is skipped, and its steps are counted as skipped."""
    data = bytearray(recording.read_bytes())
    frames = _frames(data)
    whole = len(_steps(recording)[0])
    at, _ = frames[len(frames) // 2]
    assert HEADER.unpack_from(data, at)[2] == 2, "the recording's frames are compressed"
    data[at + 11] = kind
    bad = tmp_path / f"kind{kind}.perftop"
    bad.write_bytes(bytes(data))
    steps, stats = _steps(bad)
    lost = whole - len(steps)
    assert lost > 0 and stats.skipped_steps == lost and not stats.steps_uncounted
    assert stats.warnings


def test_damage_after_the_last_step_read_gives_no_count(tmp_path):
    """Damage that no later step read bounds: the warning says an unknown number of steps
    went with it, "at least N" where some were counted, never "at least 0 steps"."""
    said = {}
    for counted, uncounted in ((0, True), (351, True), (12, False)):
        stats = ReadStats(damaged=1, skipped_bytes=54)
        stats.skipped_steps, stats.steps_uncounted = counted, uncounted
        finish_stats(tmp_path / "r.perftop", stats)
        [said[counted]] = [w for w in stats.warnings if "damaged bytes" in w]
    assert "an unknown number of steps with them" in said[0] and "at least 0" not in said[0]
    assert "at least 351 steps with them" in said[351]
    assert "12 steps with them" in said[12] and "at least" not in said[12]


def test_steps_lost_with_skipped_frames_are_said_without_a_damaged_place(tmp_path):
    """A flipped kind skips a whole frame (an unknown event), no place is lost: the steps
    that went with it are still said, "an unknown number" after the last step read (CI)."""
    said = {}
    for counted, uncounted in ((0, True), (7, True), (5, False), (0, False)):
        stats = ReadStats(unknown_events=1, skipped_bytes=83)
        stats.skipped_steps, stats.steps_uncounted = counted, uncounted
        finish_stats(tmp_path / "r.perftop", stats)
        said[counted, uncounted] = [w for w in stats.warnings if "went with" in w]
    assert "an unknown number of steps went with" in said[0, True][0]
    assert "at least 7 steps went with" in said[7, True][0]
    assert "5 steps went with" in said[5, False][0] and "at least" not in said[5, False][0]
    assert said[0, False] == []
