"""The sender's batches: what is buffered, taken in order and encoded into frames.

Plain steps (no phases) go as binary records (``wire.STEP_RECORD``), everything else as
JSON, in the order they were buffered, steps first. A batch of plain steps only, the
common case, is packed in one comprehension (~0.2 µs a step): the tracker packing each
step as it ended cost more per step in a real loop, its code and ``struct``'s being cold
between steps. Steps that fell out of the bounded deque are counted from the gaps in the
indices a process emits, which follow each other.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from perftop.hook import ring
from perftop.hook.steps import PHASED, RING_REC
from perftop.wire import (
    REC_BWD,
    REC_DATA,
    REC_INDEX,
    REC_OPT,
    REC_PHASES,
    REC_SOURCE,
    REC_T0,
    REC_T1,
    STEP_RECORD,
    STEP_SOURCES,
    encode_frame,
    encode_steps_frame,
)

SOURCE_CODE = {name: i for i, name in enumerate(STEP_SOURCES)}
# The last steps sent, kept as (index, seconds): a capture's cost is measured against the
# median of those before it (capture_cost.py). Read off the records as they are sent, on
# the sender's thread: nothing more on the training thread.
RECENT_STEPS = 20


class Buffered(Protocol):
    """What of the sender a batch reads and counts."""

    pid: int
    epoch_offset: float
    solo: bool
    ring: Any  # the step tracker whose ring holds the steps (ring.py), or None
    steps: deque[Any]
    buf: deque[Any]
    dropped: int
    next_index: int
    recent: deque[tuple[int, float]]


def encode(s: Buffered, limit: int) -> tuple[list[bytes], int]:
    """Up to ``limit`` buffered items as frames, and how many were taken: the ring's steps
    first, then steps given as tuples (a tracker without a ring), then events."""
    frames: list[bytes] = []
    taken = 0
    if s.ring is not None:
        held = ring.take(s.ring, limit)
        if held:
            frames = ring_frames(s, held)
            taken = len(held) // RING_REC
            tail = held[-RECENT_STEPS * RING_REC :]
            s.recent.extend((r[1], r[3] - r[2]) for r in STEP_RECORD.iter_unpack(tail))
    steps = take(s.steps, limit - taken, s.solo)
    if steps:
        s.recent.extend((r[REC_INDEX], r[REC_T1] - r[REC_T0]) for r in steps[-RECENT_STEPS:])
        pid, off, pack, code = s.pid, s.epoch_offset, STEP_RECORD.pack, SOURCE_CODE
        records = [pack(pid, i, t0 + off, t1 + off, data, bwd, opt, code.get(src, 0))
                   for i, t0, t1, data, bwd, opt, phases, src in steps
                   if phases is None]  # fmt: skip
        if len(records) == len(steps):
            frames.append(encode_steps_frame(records))
            count_gap(s, steps[-1][REC_INDEX], len(steps))
        else:  # steps with phases among them: one by one, in order
            frames.extend(items(s, steps))
    events = take(s.buf, limit - taken - len(steps), False)  # put() may come from any thread
    if events:
        frames.extend(items(s, events))
    return frames, taken + len(steps) + len(events)


def ring_frames(s: Buffered, records: bytes) -> list[bytes]:
    """Records read out of the ring as frames: as they are (the common case: no step has
    phases), else a step with phases as JSON in its place."""
    n = len(records) // RING_REC
    if not ring.phased(records):
        count_gap(s, STEP_RECORD.unpack_from(records, len(records) - RING_REC)[1], n)  # its index
        return [encode_steps_frame([records])]
    frames: list[bytes] = []
    packed: list[bytes] = []
    other: list[Any] = []
    for k, (pid, index, t0, t1, data, bwd, opt, src) in enumerate(STEP_RECORD.iter_unpack(records)):
        count_gap(s, index, 1)
        if src < PHASED:
            if other:
                frames.append(encode_frame(other))
                other = []
            packed.append(records[k * RING_REC : (k + 1) * RING_REC])
            continue
        if packed:
            frames.append(encode_steps_frame(packed))
            packed = []
        src -= PHASED
        source = STEP_SOURCES[src] if src < len(STEP_SOURCES) else ""
        other.append(
            ["step", pid, index, t0, t1, data, bwd, opt, ring.phases(s.ring, index), source]
        )
    if packed:
        frames.append(encode_steps_frame(packed))
    if other:
        frames.append(encode_frame(other))
    return frames


def take(queue: deque[Any], limit: int, solo: bool) -> list[Any]:
    """Up to ``limit`` items from the left of ``queue``; all at once when ``solo`` (the
    steps where the training thread sends: no other thread appends to them meanwhile)."""
    if solo and len(queue) <= limit:
        got = list(queue)
        queue.clear()
        return got
    return [queue.popleft() for _ in range(min(limit, len(queue)))]


def items(s: Buffered, todo: list[Any]) -> list[bytes]:
    """Items one by one, in order: runs of plain steps as binary records, steps with
    phases and events as JSON."""
    frames: list[bytes] = []
    pid, off, pack = s.pid, s.epoch_offset, STEP_RECORD.pack
    packed: list[bytes] = []
    other: list[Any] = []
    for item in todo:
        if isinstance(item, tuple):  # a step record (wire.REC_*)
            count_gap(s, item[REC_INDEX], 1)
            if item[REC_PHASES] is not None:
                if packed:
                    frames.append(encode_steps_frame(packed))
                    packed = []
                index, t0, t1 = item[REC_INDEX], item[REC_T0] + off, item[REC_T1] + off
                other.append(["step", pid, index, t0, t1, *item[REC_DATA:]])
                continue
            record = pack(pid, item[REC_INDEX], item[REC_T0] + off, item[REC_T1] + off,
                          item[REC_DATA], item[REC_BWD], item[REC_OPT],
                          SOURCE_CODE.get(item[REC_SOURCE], 0))  # fmt: skip
        else:
            if packed:
                frames.append(encode_steps_frame(packed))
                packed = []
            other.append(item.encode())
            continue
        if other:
            frames.append(encode_frame(other))
            other = []
        packed.append(record)
    if packed:
        frames.append(encode_steps_frame(packed))
    if other:
        frames.append(encode_frame(other))
    return frames


def count_gap(s: Buffered, last: int, count: int) -> None:
    """``count`` steps taken, up to index ``last``: the bounded deque let the others since
    the last ones taken fall out."""
    lost = last + 1 - s.next_index - count
    if lost > 0:
        s.dropped += lost
    s.next_index = last + 1
