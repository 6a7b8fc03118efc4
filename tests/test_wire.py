"""The framed format: round trips, damage, versions."""

from __future__ import annotations

import struct

import pytest

from perftop.events import Hello, LoaderInfo, Note, SessionStart, Step, decode, registered
from perftop.events.base import DecodeError
from perftop.wire import (
    MAGIC,
    STEP_RECORD,
    StreamError,
    decode_frame,
    decode_payload,
    encode_frame,
    encode_steps_frame,
)
from perftop.wire_stream import FrameReader

EVENTS = [
    SessionStart(1.0, ("python", "t.py"), "/w", "h", 10, "0.1.0"),
    Hello(1.0, 11, 10, "h", ("t.py",), rank=0, local_rank=0, world_size=2),
    Step(11, 0, 1.0, 1.5, data=0.25, backward=0.1, optimizer=0.05, phases={"fwd": 0.1}),
    LoaderInfo(1.0, 11, 0, 2, 8, True, 2, False, ((0, 12), (1, 13)), "DS"),
    Note(2.0, "warning", "test", "ünïcode ✓"),
]


def test_round_trip_through_frames():
    reader = FrameReader()
    (frame,) = reader.feed(MAGIC + encode_frame(EVENTS))
    events, unknown = decode_frame(frame)
    assert events == EVENTS and unknown == 0
    assert isinstance(events[3].workers, tuple) and events[3].workers[1] == (1, 13)


def test_stream_fed_byte_by_byte():
    data = MAGIC + encode_frame(EVENTS[:2]) + encode_frame(EVENTS[2:])
    reader = FrameReader()
    payloads = [p for i in range(len(data)) for p in reader.feed(data[i : i + 1])]
    assert [e for p in payloads for e in decode_frame(p)[0]] == EVENTS
    assert reader.pending == 0


def test_damaged_frame_is_skipped_and_counted():
    good, bad = encode_frame(EVENTS[:1]), bytearray(encode_frame(EVENTS[1:2]))
    bad[-3] ^= 0xFF
    reader = FrameReader()
    payloads = reader.feed(MAGIC + bytes(bad) + good)
    assert len(payloads) == 1 and reader.bad_frames == 1
    assert decode_frame(payloads[0])[0] == EVENTS[:1]


def test_wrong_magic_and_absurd_length_stop_the_stream():
    with pytest.raises(StreamError):
        FrameReader().feed(b"GET / HTTP/1.1\r\n")
    with pytest.raises(StreamError):
        FrameReader(max_frame=1024).feed(MAGIC + struct.pack(">III", 1 << 30, 0, 0))


def test_truncated_tail_is_pending():
    data = MAGIC + encode_frame(EVENTS)
    reader = FrameReader()
    assert reader.feed(data[:-5]) == []
    assert reader.pending > 0


def test_versions_older_and_newer_writers():
    # An older writer sent fewer fields: defaults fill them.
    step = decode(["step", 5, 3, 1.0, 2.0])
    assert step == Step(5, 3, 1.0, 2.0) and step.data == 0.0
    # A newer writer appended fields we do not know: ignored.
    assert decode(["step", 5, 3, 1.0, 2.0, 0.1, 0, 0, None, "optimizer", "new"]).index == 3
    # A newer writer's new event type: skipped, counted.
    events, unknown = decode_payload(b'[["from_the_future",1],["note",1.0,"info","s","x"]]')
    assert unknown == 1 and events == [Note(1.0, "info", "s", "x")]


def test_bad_event_arrays_are_errors():
    with pytest.raises(DecodeError):
        decode({"t": "step"})
    with pytest.raises(DecodeError):
        decode(["step", 5])  # missing required fields


def test_tags_are_unique_and_stable():
    tags = registered()
    for tag in (
        "session",
        "hello",
        "step",
        "gpu_time",
        "loader",
        "dropped",
        "job_start",
        "job_exit",
        "output",
        "note",
        "monitor",
    ):
        assert tag in tags


def test_packed_step_frames_decode_to_steps_in_order():
    recs = [STEP_RECORD.pack(7, i, 100.0 + i, 100.5 + i, 0.1, 0.2, 0.05, 3) for i in range(3)]
    data = MAGIC + encode_steps_frame(recs) + encode_frame(EVENTS[4:])
    frames = FrameReader().feed(data)
    events = [e for f in frames for e in decode_frame(f)[0]]
    assert events[:3] == [
        Step(7, i, 100.0 + i, 100.5 + i, 0.1, 0.2, 0.05, None, "optimizer") for i in range(3)
    ]
    assert events[3] == EVENTS[4]


def test_frames_of_an_unknown_kind_are_skipped_and_counted():
    from perftop.wire import Frame

    assert decode_frame(Frame(99, b"whatever a newer perftop sends")) == ([], 1)
