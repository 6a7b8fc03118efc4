"""Reading a live stream: bytes in, whole frames and their events out, with one rule for
what is lost. The readers of a stream (the monitor's socket, the collector, a viewer, an
ssh stream, the hook's inbox) need it; the writers of :mod:`perftop.wire` (the hook's
sender, a recording) do not. Standard library only, like :mod:`perftop.wire`.
"""

from __future__ import annotations

import zlib

from perftop.events.base import DecodeError, Event
from perftop.events.validate import check_all
from perftop.wire import (
    HEADER,
    MAGIC,
    MAX_FRAME,
    Frame,
    FrameError,
    StepBatch,
    StreamError,
    decode_frame,
)


class FrameReader:
    """Incremental decoder for a byte stream: feed bytes, get payloads.

    Frames whose CRC fails are skipped and counted in ``bad_frames``; a wrong magic or a
    length over ``max_frame`` raises :class:`StreamError`, since nothing after it can be
    trusted.
    """

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._magic_seen = False
        self.max_frame = max_frame
        self.bad_frames = 0

    def feed(self, data: bytes) -> list[Frame]:
        """Whole, intact frames completed by ``data``."""
        self._buf += data
        buf = self._buf
        pos = 0
        out: list[Frame] = []
        if not self._magic_seen:
            if len(buf) < len(MAGIC):
                if not MAGIC.startswith(bytes(buf)):
                    raise StreamError("not a perftop stream (bad magic)")
                return out
            if buf[: len(MAGIC)] != MAGIC:
                raise StreamError("not a perftop stream (bad magic)")
            self._magic_seen = True
            pos = len(MAGIC)
        try:
            while len(buf) - pos >= HEADER.size:
                length, crc, kind = HEADER.unpack_from(buf, pos)
                if length > self.max_frame:
                    raise StreamError(f"frame of {length} bytes is over the {self.max_frame} limit")
                end = pos + HEADER.size + length
                if end > len(buf):
                    break
                payload = bytes(buf[pos + HEADER.size : end])
                pos = end
                if zlib.crc32(payload) != crc:
                    self.bad_frames += 1
                    continue
                out.append(Frame(kind, payload))
        finally:
            del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        """Bytes held that do not yet make a whole frame (a truncated tail, at EOF)."""
        return len(self._buf)


class EventReader:
    """Bytes of a stream in, ``(frame, events)`` out: the one loop every reader of a live
    stream shares (the monitor's socket, the collector, a viewer, an ssh stream). A frame
    of packed steps comes out as one :class:`StepBatch`, for the ingest to fold whole.

    One rule for what is lost: a frame whose CRC fails or whose payload does not decode is
    skipped and counted in ``rejected``; a stream that cannot be trusted any more (a wrong
    magic, an oversized frame) counts one more and raises :class:`StreamError`.
    """

    __slots__ = ("_frames", "rejected")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._frames = FrameReader(max_frame)
        self.rejected = 0

    def feed(self, data: bytes) -> list[tuple[Frame, list[Event]]]:
        frames = self._frames
        try:
            got = frames.feed(data)
        except StreamError:
            self.rejected += frames.bad_frames + 1
            frames.bad_frames = 0
            raise
        out: list[tuple[Frame, list[Event]]] = []
        for frame in got:
            try:
                events, _unknown = decode_frame(frame, batch=True)
                # each event against its own types, as a recording's reader checks it (a
                # batch's records were checked whole): a NaN or a string for a time must
                # not reach the model
                check_all([e for e in events if type(e) is not StepBatch])
            except (FrameError, DecodeError):
                self.rejected += 1
                continue
            out.append((frame, events))
        self.rejected += frames.bad_frames
        frames.bad_frames = 0
        return out
