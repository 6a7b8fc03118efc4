"""The framed format shared by the socket and the recording file. Standard library only.

A stream is ``MAGIC`` followed by frames. A frame is a 12-byte header (payload length,
CRC-32 of the payload, payload kind) and a payload. Kind 0 is UTF-8 JSON, an array of
events in their array form (see :mod:`perftop.events.base`). Kind 1 is packed step records
(:data:`STEP_RECORD`): steps are by far the most frequent event, and packing them costs the
hook's sender thread a tenth of what JSON does. Batching many events per frame keeps
syscalls and file writes few; the CRC lets a reader skip a damaged frame and go on. A
reader skips frames of a kind it does not know, counting them. Kind 2 exists only in files:
a deflate stream of whole frames (see :mod:`perftop.reader`), its first byte a flag.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, NamedTuple

from perftop.events.base import DecodeError, Event, decode
from perftop.events.core import Step
from perftop.events.fleet import NodeScope

MAGIC = b"PERFTOP\x00"
HEADER = struct.Struct(">III")
MAX_FRAME = 8 * 1024 * 1024
# The most a writer puts in one frame: half the reader's limit, so that a frame compressed
# in a recording (deflate may grow it a little) is still one the reader takes.
FIT_FRAME = MAX_FRAME // 2

KIND_JSON = 0
KIND_STEPS = 1
KIND_ZLIB = 2  # recordings only: flag byte, then raw deflate data of whole frames
ZLIB_START = 1  # flag: a new deflate stream starts here (a reader may begin here)
# A collector's wrapper around one node's frame: u16 name length, the node name (UTF-8),
# then the node's frame as it came (header and payload). Readers of older perftops skip it.
KIND_NODE = 3
NODE_NAME = struct.Struct(">H")
# pid, index, t0, t1, data, backward, optimizer (seconds), source code (see STEP_SOURCES)
STEP_RECORD = struct.Struct("<iqdddddB")
_STEP_TIMES = struct.Struct("<12x5dx")  # a record's five times alone
STEP_SOURCES = ("", "loader", "backward", "optimizer", "explicit")
# The hook's note (source ``hook:PID``) saying that this process's data wait is the
# training thread's time off the CPU before its forwards (a feeder: no DataLoader fetch on the
# training thread); recordings of 0.1 said it as DATA_WAIT_NOTE_V1, read the same.
DATA_WAIT_NOTE = (
    "data wait: the training thread's time off the CPU before its forwards "
    "(no DataLoader on the training thread)"
)
DATA_WAIT_NOTE_V1 = (
    "data wait: measured before each step's first forward (no DataLoader on the training thread)"
)
# How the hook's note (source ``hook:PID``) begins when its sync detector stops sampling for
# good (torch.compile in use), followed by why and what that means; the model keeps the why.
SYNC_PAUSED_NOTE = "sync detection paused: "
# The hook's own step record: the tuple the tracker emits (steps.py) and holds (steps_cold)
# and the sender packs, by position: (index, t0, t1, data, backward, optimizer, phases or
# None, source name). A record without phases is packed with STEP_RECORD, else sent as JSON.
REC_INDEX, REC_T0, REC_T1, REC_DATA, REC_BWD, REC_OPT, REC_PHASES, REC_SOURCE = range(8)


class Frame(NamedTuple):
    kind: int
    payload: bytes

    def encode(self) -> bytes:
        return HEADER.pack(len(self.payload), zlib.crc32(self.payload), self.kind) + self.payload


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode


class FrameError(ValueError):
    """A frame that cannot be trusted (bad CRC, bad JSON, bad event)."""


class StreamError(ValueError):
    """A stream that cannot be read on (wrong magic, absurd frame length)."""


def encode_frame(items: Iterable[Event | list[Any]]) -> bytes:
    """One frame holding ``items`` (events, or events already in array form)."""
    payload = _dumps([i.encode() if isinstance(i, Event) else i for i in items]).encode()
    return HEADER.pack(len(payload), zlib.crc32(payload), KIND_JSON) + payload


def fitted_frames(events: Iterable[Event], limit: int = FIT_FRAME) -> tuple[list[Frame], int]:
    """``events`` as JSON frames of at most ``limit`` payload bytes each, in order, and how
    many events were left out because one alone does not fit (the caller counts them): a
    writer never writes a frame that its reader refuses."""
    frames: list[Frame] = []
    parts: list[bytes] = []
    size, left_out = 2, 0  # the brackets
    for ev in events:
        part = _dumps(ev.encode()).encode()
        if len(part) + 2 > limit:
            left_out += 1
            continue
        if parts and size + 1 + len(part) > limit:
            frames.append(_json_frame(parts))
            parts, size = [], 2
        size += len(part) + (1 if parts else 0)
        parts.append(part)
    if parts:
        frames.append(_json_frame(parts))
    return frames, left_out


def _json_frame(parts: list[bytes]) -> Frame:
    return Frame(KIND_JSON, b"[" + b",".join(parts) + b"]")


def encode_steps_frame(records: Iterable[bytes]) -> bytes:
    """One frame of step records already packed with :data:`STEP_RECORD`."""
    payload = b"".join(records)
    return HEADER.pack(len(payload), zlib.crc32(payload), KIND_STEPS) + payload


def encode_node_frame(node: str, frame: Frame) -> Frame:
    """``frame`` of node ``node``, wrapped so a reader knows whose events they are."""
    name = node.encode()
    return Frame(KIND_NODE, NODE_NAME.pack(len(name)) + name + frame.encode())


StepRecord = tuple[int, int, float, float, float, float, float, int]  # STEP_RECORD's fields


class StepBatch(Event):
    """The steps of one packed frame, not made into :class:`Step` events one by one: what
    a live stream's reader hands the ingest, which folds the records into the model in one
    loop (``Session.apply``), the same figures as the steps one at a time. Never encoded:
    the frame it came in is what is recorded and forwarded."""

    __slots__ = ("count", "payload")

    def __init__(self, payload: bytes) -> None:
        if len(payload) % STEP_RECORD.size:
            raise FrameError("step frame is not a whole number of records")
        # a time that is not a finite number (what a recording's reader rejects too): the
        # sum of a frame's times is finite only if every one is (or the frame is absurd)
        times = chain.from_iterable(_STEP_TIMES.iter_unpack(payload))
        if not math.isfinite(sum(times)):
            raise FrameError("bad 'step' record: a time that is not a finite number")
        self.payload = payload
        self.count = len(payload) // STEP_RECORD.size  # steps in the batch

    def records(self) -> Iterator[StepRecord]:
        return STEP_RECORD.iter_unpack(self.payload)

    def __repr__(self) -> str:
        return f"StepBatch({self.count} steps)"


def counts_as(ev: Event) -> int:
    """How many events ``ev`` stands for: a :class:`StepBatch` its steps, any other one."""
    return ev.count if type(ev) is StepBatch else 1


def event_count(events: Sequence[Event]) -> int:
    """How many events ``events`` stand for (a :class:`StepBatch` counts its steps)."""
    return sum(map(counts_as, events))


def decode_frame(frame: Frame, *, batch: bool = False) -> tuple[list[Event], int]:
    """The events in a frame and how many this reader had to skip as unknown. A node
    frame's events come between :class:`NodeScope` markers. ``batch``: a frame of packed
    steps as one :class:`StepBatch` (the live ingest's form) rather than :class:`Step`s."""
    if frame.kind == KIND_JSON:
        return decode_payload(frame.payload)
    if frame.kind == KIND_STEPS:
        return ([StepBatch(frame.payload)] if batch else decode_steps(frame.payload)), 0
    if frame.kind == KIND_NODE:
        node, inner = _unwrap_node(frame.payload)
        if inner.kind == KIND_NODE:
            raise FrameError("a node frame inside a node frame")
        events, unknown = decode_frame(inner, batch=batch)
        return [NodeScope(node), *events, NodeScope("")], unknown
    return [], 1


def _unwrap_node(payload: bytes) -> tuple[str, Frame]:
    try:
        (n,) = NODE_NAME.unpack_from(payload)
        node = payload[NODE_NAME.size : NODE_NAME.size + n].decode()
        pos = NODE_NAME.size + n
        length, crc, kind = HEADER.unpack_from(payload, pos)
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"bad node frame: {exc}") from None
    inner = payload[pos + HEADER.size :]
    if len(inner) != length or zlib.crc32(inner) != crc or not node:
        raise FrameError("bad node frame: the inner frame does not check")
    return node, Frame(kind, inner)


def decode_steps(payload: bytes) -> list[Event]:
    if len(payload) % STEP_RECORD.size:
        raise FrameError("step frame is not a whole number of records")
    return steps_of(STEP_RECORD.iter_unpack(payload))


def steps_of(records: Iterable[StepRecord]) -> list[Event]:
    """Packed step records as :class:`Step` events (an unknown source code: no source)."""
    sources, make, nsrc = STEP_SOURCES, Step._make, len(STEP_SOURCES)
    return [
        make((pid, index, t0, t1, data, bwd, opt, None, sources[src] if src < nsrc else ""))
        for pid, index, t0, t1, data, bwd, opt, src in records
    ]


def decode_payload(payload: bytes) -> tuple[list[Event], int]:
    """The events in a payload and how many had a tag this reader does not know."""
    try:
        items = json.loads(payload)
    except ValueError as exc:  # not JSON, not UTF-8, an integer of too many digits
        raise FrameError(f"frame is not JSON: {exc}"[:200]) from None
    except RecursionError:
        raise FrameError("frame is not JSON: nested too deep") from None
    if not isinstance(items, list):
        raise FrameError("frame payload is not an array")
    events: list[Event] = []
    unknown = 0
    for item in items:
        try:
            ev = decode(item)
        except DecodeError as exc:
            raise FrameError(str(exc)) from None
        if ev is None:
            unknown += 1
        else:
            events.append(ev)
    return events, unknown
