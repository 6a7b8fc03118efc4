"""Reading recordings: outer frames with their file offsets, compressed streams decoded.

A recording is ``MAGIC`` and frames (see :mod:`perftop.wire`). Frames of kind
:data:`~perftop.wire.KIND_ZLIB` carry a deflate stream that the writer sync-flushes every
half second; the stream restarts (flag ``ZLIB_START``) every ``SEGMENT_BYTES`` of input, and
those restarts, like plain frames, are where a reader may begin (``resumable``): a replay's
index seeks there. Damage costs what it touches: past a bad frame (a flipped bit in its
length, kind, CRC or payload, or noise) reading resumes at the next frame whose CRC checks,
a broken stream resumes at its next restart, a cut tail gives up what decompresses whole;
the bytes and steps skipped are counted. Reading never writes to the file.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NamedTuple

from perftop.errors import RecordingError
from perftop.events import FORMAT_VERSION, DecodeError, Event, SessionStart, Step
from perftop.events.validate import check_all, check_packed_steps
from perftop.reader_inflate import INFLATE_MAX, inner_frames, salvage
from perftop.reader_resync import Resync
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
    Frame,
    FrameError,
    StepBatch,
    decode_frame,
    event_count,
)

MAX_BAD_INNER = 256  # bad frames decoded in one compressed frame before giving up the rest
_OUTER_KINDS = (KIND_JSON, KIND_STEPS, KIND_ZLIB, KIND_NODE)


class Chunk(NamedTuple):
    """The events of one outer frame; ``resumable``: reading may start at ``offset``."""

    offset: int
    end: int
    resumable: bool
    events: list[Event]


def open_recording(path: str | os.PathLike[str]) -> tuple[Path, IO[bytes], int]:
    """The open file and its size, or a :class:`RecordingError` naming the file."""
    p = Path(path)
    try:
        f = open(p, "rb")  # noqa: SIM115 (the caller closes it)
    except OSError as exc:
        raise RecordingError(f"{p}: cannot open: {exc.strerror}") from None
    head = f.read(len(MAGIC))
    if not head:
        f.close()
        raise RecordingError(f"{p}: empty file, not a perftop recording")
    if head != MAGIC:
        f.close()
        raise RecordingError(f"{p}: not a perftop recording")
    return p, f, os.fstat(f.fileno()).st_size


@dataclass
class ReadStats:
    """What a reader had to skip; each non-zero figure becomes a warning."""

    frames: int = 0
    events: int = 0
    bad_frames: int = 0
    unknown_events: int = 0
    truncated_bytes: int = 0
    damaged: int = 0  # places where reading lost its frame and resumed at the next good one
    skipped_bytes: int = 0  # bytes at those places (and in the broken streams they cut)
    skipped_steps: int = 0  # steps missing there, from each process's step numbers
    steps_uncounted: bool = False  # damage after a process's last step read: more may be lost
    warnings: list[str] = field(default_factory=list)


class FrameScanner(Resync):
    """Walks a recording's outer frames from an offset, decoding events; counts damage
    in ``stats``."""

    def __init__(
        self, path: Path, f: IO[bytes], size: int, stats: ReadStats, batch: bool = False
    ) -> None:
        """``batch``: a frame of packed steps as one :class:`StepBatch` (a report's read:
        the model folds it whole, as live), not a :class:`Step` each."""
        self.path, self.f, self.size, self.stats = path, f, size, stats
        self.batch = batch
        self._inflate: zlib._Decompress | None = None
        self.checked_version = False
        self._last_step: dict[int, int] = {}  # each process's last step index read
        self._gap_from: dict[int, int] = {}  # the same, as it was before the last damage
        self._after_damage = False
        self._stepped_since = True  # a step was read after the last damage (or no damage)
        self._salvaging = False  # decoding what inflated before a damage: every gap counts

    def chunks(self, offset: int = len(MAGIC), stop: int | None = None) -> Iterator[Chunk]:
        """Outer frames from ``offset`` (a resumable one) up to ``stop`` or the end. Past a
        damaged frame (a bad length, kind or CRC) reading resumes at the next frame whose
        CRC checks; what lay between is counted in ``stats``."""
        yield from self._chunks(offset, stop)
        if self._gap_from or not self._stepped_since:
            # A process never stepped again after a damage (or none did, the damage before
            # any step read): the steps lost after its last one read are unknown.
            self.stats.steps_uncounted = True

    def _chunks(self, offset: int, stop: int | None) -> Iterator[Chunk]:
        f, st, end_at = self.f, self.stats, self.size if stop is None else stop
        self._inflate = None
        pos = offset
        while pos < end_at:
            f.seek(pos)
            head = f.read(HEADER.size)
            if len(head) < HEADER.size:
                st.truncated_bytes = len(head)
                return
            length, crc, kind = HEADER.unpack(head)
            payload = f.read(length) if length <= MAX_FRAME else b""
            whole = length <= MAX_FRAME and len(payload) == length
            if whole and length and zlib.crc32(payload) == crc:  # empty: zeros, not a frame
                start, pos = pos, pos + HEADER.size + length
                if kind == KIND_ZLIB:
                    resumable = bool(payload[:1]) and payload[0] & ZLIB_START != 0
                    frames = self._inflated(payload, resumable, True)
                else:
                    resumable, frames = True, [Frame(kind, payload)]
                    if kind not in _OUTER_KINDS:
                        # The header's kind is outside the CRC: a flipped one reads as a
                        # newer writer's kind. Its payload may have been the deflate
                        # stream's next piece, so the stream waits for its next restart.
                        self._inflate = None
                yield Chunk(start, pos, resumable, self._decode(frames))
                continue
            nxt = self.resync(pos + 1)
            if nxt is None and not whole:  # nothing readable after: a cut last write
                st.truncated_bytes = self.size - pos
                if kind == KIND_ZLIB and payload:
                    yield Chunk(pos, self.size, False, self._decode(self._salvaged(payload)))
                return
            st.damaged += 1
            st.skipped_bytes += (nxt if nxt is not None else self.size) - pos
            frames = self._salvaged(payload) if kind == KIND_ZLIB and whole else []
            self._lost_steps()  # also inside what was salvaged: a bad inner frame is a gap
            self._salvaging = True
            events = self._decode(frames)
            self._salvaging = False
            self._lost_steps()
            yield Chunk(pos, nxt or self.size, False, events)
            if nxt is None:
                return
            pos = nxt

    def _salvaged(self, payload: bytes) -> list[Frame]:
        """The inner frames that inflate before the damage in a broken compressed frame;
        the stream ends there (reading waits for its next restart)."""
        if payload[:1] and payload[0] & ZLIB_START:
            self._inflate = zlib.decompressobj(-15)
        if self._inflate is None:
            return []
        data = salvage(self._inflate, payload[1:])
        self._inflate = None
        return inner_frames(data)[0]

    def _inflated(self, payload: bytes, start: bool, intact: bool) -> list[Frame]:
        st = self.stats
        if start:
            self._inflate = zlib.decompressobj(-15)
        if self._inflate is None:  # the stream broke earlier: wait for its next restart
            st.skipped_bytes += HEADER.size + len(payload)
            return []
        try:
            data = self._inflate.decompress(payload[1:], INFLATE_MAX)
            if self._inflate.unconsumed_tail:  # inflates past what any writer holds: a bomb
                raise zlib.error("inflates past the limit")
        except zlib.error:
            self._inflate, data = None, b""
            st.damaged += 1
            st.skipped_bytes += HEADER.size + len(payload)
            self._lost_steps()
        frames, bad = inner_frames(data)
        if bad and intact:
            st.bad_frames += bad
            self._lost_steps()  # an inner frame lost: its steps counted from their numbers
        return frames

    def _lost_steps(self) -> None:
        """Reading lost its place here: the steps missing before each process's next step
        read are counted from the step numbers (a process's first step is number 0)."""
        self._gap_from = dict(self._last_step)
        self._after_damage = True
        self._stepped_since = False

    def _stepped(self, pid: int, first: int, last: int) -> None:
        """Steps numbered ``first`` to ``last`` of process ``pid`` read (in order): past a
        damage, the steps missing before ``first`` are counted (before a process's first
        step read, from step number 0)."""
        gap_from = self._gap_from
        if self._salvaging or (
            self._after_damage and (pid in gap_from or pid not in self._last_step)
        ):
            before = gap_from.pop(pid, self._last_step.get(pid, -1))
            self.stats.skipped_steps += max(0, first - before - 1)
        self._last_step[pid] = last
        self._stepped_since = True

    def _decode(self, frames: list[Frame]) -> list[Event]:
        st = self.stats
        out: list[Event] = []
        bad = 0
        for i, frame in enumerate(frames):
            st.frames += 1
            try:
                if self.batch and frame.kind == KIND_STEPS and self.checked_version:
                    self._decode_batch(frame, out)  # its times checked whole
                    continue
                events, unknown = decode_frame(frame)
                if frame.kind == KIND_STEPS:
                    check_packed_steps(events)
                else:
                    check_all(events)
            except (FrameError, DecodeError):
                st.bad_frames += 1
                self._lost_steps()  # whatever steps it held are counted from their numbers
                bad += 1
                if bad >= MAX_BAD_INNER:  # made to be slow: the rest of the piece is skipped
                    st.bad_frames += len(frames) - i - 1
                    break
                continue
            st.unknown_events += unknown
            if unknown and not events:
                self._lost_steps()  # a whole frame skipped (its kind unknown, or flipped)
            if events and not self.checked_version:
                self.checked_version = True
                check_version(self.path, events[0])
            out.extend(events)
            first, last = (events[0], events[-1]) if events else (None, None)
            if (
                frame.kind == KIND_STEPS
                and isinstance(first, Step)
                and isinstance(last, Step)
                and first.pid == last.pid
            ):
                self._stepped(first.pid, first.index, last.index)  # one process's: ends tell
                continue
            for ev in events:
                if type(ev) is Step:
                    self._stepped(ev.pid, ev.index, ev.index)
        st.events += event_count(out)
        return out

    def _decode_batch(self, frame: Frame, out: list[Event]) -> None:
        """A frame of packed steps as one batch, its steps counted as :meth:`_decode`
        counts them (its first and last record tell, as one process's steps do)."""
        batch = StepBatch(frame.payload)
        if not batch.count:
            return
        out.append(batch)
        first = STEP_RECORD.unpack_from(frame.payload, 0)
        last = STEP_RECORD.unpack_from(frame.payload, len(frame.payload) - STEP_RECORD.size)
        if first[0] == last[0]:
            self._stepped(first[0], first[1], last[1])
        else:
            for r in batch.records():
                self._stepped(r[0], r[1], r[1])


def check_version(p: Path, ev: Event) -> None:
    if isinstance(ev, SessionStart) and ev.version > FORMAT_VERSION:
        raise RecordingError(
            f"{p}: recorded with format {ev.version}; this perftop reads up to {FORMAT_VERSION}"
        )
