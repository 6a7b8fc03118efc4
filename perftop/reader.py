"""Reading recordings: outer frames with their file offsets, compressed streams decoded.

A recording is ``MAGIC`` and frames (see :mod:`perftop.wire`). Frames of kind
:data:`~perftop.wire.KIND_ZLIB` carry a deflate stream that the writer sync-flushes every
half second; the stream restarts (flag ``ZLIB_START``) every ``SEGMENT_BYTES`` of input, and
those restarts, like plain frames, are where a reader may begin (``resumable``): a replay's
index seeks there. Damage costs what it touches: a bad frame is skipped, a broken stream
resumes at its next restart, a cut tail gives up what decompresses whole. Reading never
writes to the file.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NamedTuple

from perftop.errors import RecordingError
from perftop.events import FORMAT_VERSION, Event, SessionStart
from perftop.wire import (
    HEADER,
    KIND_ZLIB,
    MAGIC,
    MAX_FRAME,
    ZLIB_START,
    Frame,
    FrameError,
    decode_frame,
)


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


def inner_frames(data: bytes) -> tuple[list[Frame], int]:
    """Whole frames with a good CRC in decompressed ``data``, and how many were bad."""
    out: list[Frame] = []
    pos, n, bad = 0, len(data), 0
    while n - pos >= HEADER.size:
        length, crc, kind = HEADER.unpack_from(data, pos)
        end = pos + HEADER.size + length
        if end > n:
            bad += 1  # cut by the end of a truncated or damaged stream
            break
        payload = data[pos + HEADER.size : end]
        pos = end
        if zlib.crc32(payload) != crc:
            bad += 1
            continue
        out.append(Frame(kind, payload))
    return out, bad


@dataclass
class ReadStats:
    """What a reader had to skip; each non-zero figure becomes a warning."""

    frames: int = 0
    events: int = 0
    bad_frames: int = 0
    unknown_events: int = 0
    truncated_bytes: int = 0
    warnings: list[str] = field(default_factory=list)


class FrameScanner:
    """Walks a recording's outer frames from an offset, decoding events; counts damage
    in ``stats``."""

    def __init__(self, path: Path, f: IO[bytes], size: int, stats: ReadStats) -> None:
        self.path, self.f, self.size, self.stats = path, f, size, stats
        self._inflate: zlib._Decompress | None = None
        self.checked_version = False

    def chunks(self, offset: int = len(MAGIC), stop: int | None = None) -> Iterator[Chunk]:
        """Outer frames from ``offset`` (a resumable one) up to ``stop`` or the end."""
        f, st, end_at = self.f, self.stats, self.size if stop is None else stop
        f.seek(offset)
        self._inflate = None
        pos = offset
        while pos < end_at:
            head = f.read(HEADER.size)
            if len(head) < HEADER.size:
                st.truncated_bytes = len(head)
                return
            length, crc, kind = HEADER.unpack(head)
            if length > MAX_FRAME:
                st.warnings.append(
                    f"{self.path}: stopped reading at a damaged frame "
                    f"(frame of {length} bytes is over the {MAX_FRAME} limit)"
                )
                return
            payload = f.read(length)
            start, pos = pos, pos + HEADER.size + length
            whole = len(payload) == length
            if not whole:
                st.truncated_bytes = HEADER.size + len(payload)
                if kind != KIND_ZLIB:
                    return
            if whole and zlib.crc32(payload) != crc:
                st.bad_frames += 1
                if kind != KIND_ZLIB:
                    continue
            if kind == KIND_ZLIB:
                resumable = bool(payload[:1]) and payload[0] & ZLIB_START != 0
                frames = self._inflated(payload, resumable, whole and zlib.crc32(payload) == crc)
            else:
                resumable, frames = True, [Frame(kind, payload)]
            yield Chunk(start, pos, resumable, self._decode(frames))
            if not whole:
                return

    def _inflated(self, payload: bytes, start: bool, intact: bool) -> list[Frame]:
        st = self.stats
        if start:
            self._inflate = zlib.decompressobj(-15)
        if self._inflate is None:  # the stream broke earlier: wait for its next restart
            return []
        if intact:
            try:
                data = self._inflate.decompress(payload[1:])
            except zlib.error:
                self._inflate, data = None, b""
        else:  # salvage what inflates before the damage; the stream ends here
            data = _salvage(self._inflate, payload[1:])
            self._inflate = None
        frames, bad = inner_frames(data)
        st.bad_frames += bad if intact else 0
        return frames

    def _decode(self, frames: list[Frame]) -> list[Event]:
        st = self.stats
        out: list[Event] = []
        for frame in frames:
            st.frames += 1
            try:
                events, unknown = decode_frame(frame)
            except FrameError:
                st.bad_frames += 1
                continue
            st.unknown_events += unknown
            if events and not self.checked_version:
                self.checked_version = True
                check_version(self.path, events[0])
            out.extend(events)
        st.events += len(out)
        return out


def _salvage(inflate: zlib._Decompress, data: bytes, piece: int = 512) -> bytes:
    """What ``inflate`` gives for ``data`` up to the first error, a piece at a time."""
    out = []
    for i in range(0, len(data), piece):
        try:
            out.append(inflate.decompress(data[i : i + piece]))
        except zlib.error:
            break
    return b"".join(out)


def check_version(p: Path, ev: Event) -> None:
    if isinstance(ev, SessionStart) and ev.version > FORMAT_VERSION:
        raise RecordingError(
            f"{p}: recorded with format {ev.version}; this perftop reads up to {FORMAT_VERSION}"
        )
