"""Recordings built by structure, for the recording fuzzer (tests/test_recording_fuzz.py,
scripts/recording_fuzz.py): a valid head and steps, then pieces drawn by hypothesis, each
a real way a file goes wrong or is made to hurt: valid frames with hostile content (every
event type, each field given a value of another type, NaN, huge or deep), deflate bombs at
and over the reader's limit, zero runs, frame lengths at and over ``MAX_FRAME``, cut
tails, flipped bytes, compressed segments as the writer makes them. Each recording comes
with the steps written before its first damage: a reader must never lose those.

The oracles (``check``): reading never raises but :class:`RecordingError`, stays within
its time, and keeps those steps."""

from __future__ import annotations

import json
import zlib
from typing import Any

from hypothesis import strategies as st

from perftop.events import SessionStart, Step, registered
from perftop.reader_inflate import INFLATE_MAX
from perftop.wire import (
    HEADER,
    KIND_JSON,
    KIND_NODE,
    KIND_STEPS,
    KIND_ZLIB,
    MAGIC,
    MAX_FRAME,
    STEP_RECORD,
    ZLIB_START,
    encode_frame,
)

TAGS = sorted(registered())


def frame(kind: int, payload: bytes) -> bytes:
    return HEADER.pack(len(payload), zlib.crc32(payload), kind) + payload


def head() -> bytes:
    return MAGIC + encode_frame([SessionStart(1.0, ("python", "t.py"), "/", "h", 1, "0")])


def steps_frame(first: int, n: int, packed: bool) -> bytes:
    if packed:
        recs = [
            STEP_RECORD.pack(7, i, 1.0 + i, 1.5 + i, 0.1, 0.1, 0.1, 1)
            for i in range(first, first + n)
        ]
        return frame(KIND_STEPS, b"".join(recs))
    return encode_frame([Step(7, i, 1.0 + i, 1.5 + i) for i in range(first, first + n)])


def deflated(data: bytes, start: bool = True) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
    return frame(KIND_ZLIB, bytes((ZLIB_START if start else 0,)) + body)


def _deep(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = [v]
    return v


ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.builds(_deep, st.integers(0, 40)),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    st.lists(st.integers(), max_size=4),
)


@st.composite
def hostile_frame(draw: st.DrawFn) -> bytes:
    """A frame whose CRC checks, around content no writer makes."""
    how = draw(st.sampled_from(["event", "raw_json", "deep", "bigint", "empty", "node", "steps"]))
    if how == "event":
        tag = draw(st.sampled_from(TAGS))
        n = len(registered()[tag]._FIELDS)
        fields = draw(st.lists(ODD_VALUES, min_size=0, max_size=n + 2))
        return frame(KIND_JSON, json.dumps([[tag, *fields]], allow_nan=True).encode())
    if how == "raw_json":
        return frame(KIND_JSON, draw(st.binary(max_size=64)))
    if how == "deep":
        d = draw(st.sampled_from([9, 100, 1000, 100_000]))
        return frame(KIND_JSON, b"[" * d + b"]" * d)
    if how == "bigint":
        return frame(KIND_JSON, b'[["step",7,' + b"9" * draw(st.integers(20, 6000)) + b",1.0,2.0]]")
    if how == "empty":
        return frame(draw(st.sampled_from([KIND_JSON, KIND_STEPS, KIND_ZLIB])), b"")
    if how == "node":
        inner = draw(st.binary(max_size=40))
        name = draw(st.text(max_size=5)).encode()
        return frame(KIND_NODE, len(name).to_bytes(2, "big") + name + inner)
    nan = STEP_RECORD.pack(7, 3, float("nan"), float("inf"), 0.0, 0.0, 0.0, 9)
    return frame(KIND_STEPS, nan + draw(st.binary(max_size=STEP_RECORD.size - 1)))


@st.composite
def damage(draw: st.DrawFn) -> bytes:
    """One piece of damage, bombs and zero runs, frames at and over every limit."""
    how = draw(
        st.sampled_from(
            ["hostile", "bomb", "tiny", "zeros", "length", "noise", "zlib_noise", "cut"]
        )
    )
    if how == "tiny":  # a compressed frame of the most inner frames that fit, each bad
        return deflated(frame(KIND_JSON, b"1") * (INFLATE_MAX // 13))
    if how == "hostile":
        return draw(hostile_frame())
    if how == "bomb":
        size = draw(st.sampled_from([INFLATE_MAX - 64, INFLATE_MAX, INFLATE_MAX + 1, 64 << 20]))
        return deflated(bytes(size), draw(st.booleans()))
    if how == "zeros":
        return bytes(draw(st.sampled_from([1, 11, 12, 13, 4096, 1 << 20, 3 << 20])))
    if how == "length":
        length = draw(st.sampled_from([MAX_FRAME - 1, MAX_FRAME, MAX_FRAME + 1, 2**32 - 1]))
        return HEADER.pack(length, 0, KIND_JSON) + draw(st.binary(max_size=64))
    if how == "noise":
        return draw(st.binary(min_size=1, max_size=2048))
    if how == "zlib_noise":
        return frame(
            KIND_ZLIB, bytes((draw(st.sampled_from([0, 1])),)) + draw(st.binary(max_size=256))
        )
    return steps_frame(10_000, 3, False)[: draw(st.integers(1, 20))]  # a cut frame


@st.composite
def recordings(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """(a recording, the steps written before its first damage)."""
    out = [head()]
    kept: list[int] = []
    index, damaged = 0, False
    for _ in range(draw(st.integers(1, 8))):
        what = draw(st.sampled_from(["steps", "packed", "compressed", "damage", "damage"]))
        if what == "damage":
            out.append(draw(damage()))
            damaged = True
            continue
        n = draw(st.integers(1, 20))
        if what == "compressed":
            piece = deflated(steps_frame(index, n, False) + steps_frame(index + n, n, True))
            n *= 2
        else:
            piece = steps_frame(index, n, what == "packed")
        out.append(piece)
        if not damaged:
            kept.extend(range(index, index + n))
        index += n
    return b"".join(out), kept


def check(path: Any, kept: list[int], limit_s: float = 20.0) -> str | None:
    """What an oracle found wrong reading ``path`` in this process, or None."""
    import time

    from perftop.errors import RecordingError
    from perftop.reader import ReadStats
    from perftop.recording import read_events

    t = time.monotonic()
    stats = ReadStats()
    try:
        got = {e.index for e in read_events(path, stats) if type(e) is Step and e.pid == 7}
    except RecordingError:
        got = set()
    except Exception as exc:  # any other: a traceback for the user
        return f"raised {type(exc).__name__}: {exc}"[:300]
    took = time.monotonic() - t
    if took > limit_s:
        return f"took {took:.1f} s"
    lost = sorted(set(kept) - got)
    if lost:
        return f"lost {len(lost)} steps written before the damage (first {lost[0]})"
    return None
