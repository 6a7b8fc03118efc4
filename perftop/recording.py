"""Recording files: append-only framed events, flushed at least once a second.

The file is the socket's byte stream written down (see :mod:`perftop.wire`), so a replay is
just another source of the same events. A crash of the writer loses at most the unflushed
second; a reader skips a truncated tail or a damaged frame with a warning.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from perftop.errors import RecordingError
from perftop.events import FORMAT_VERSION, Event, SessionStart
from perftop.wire import (
    MAGIC,
    Frame,
    FrameError,
    FrameReader,
    StreamError,
    decode_frame,
    encode_frame,
)

FLUSH_EVERY_S = 0.5
SUFFIX = ".perftop"


def default_path(now: float | None = None) -> Path:
    """A timestamped recording name in the current directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return Path(f"perftop-{stamp}{SUFFIX}")


class RecordingWriter:
    """Appends frames to a file; the owner calls :meth:`tick` often so data hits the OS."""

    def __init__(
        self, path: str | os.PathLike[str], *, force: bool = False, append: bool = False
    ) -> None:
        """``append`` continues an existing recording (a background recorder taking over
        from the TUI); the header is written only when the file is new or empty."""
        self.path = Path(path)
        mode = "ab" if append else "wb" if force else "xb"
        try:
            self._file = open(self.path, mode)  # noqa: SIM115 (closed in close())
        except FileExistsError:
            raise RecordingError(
                f"{self.path}: already exists (pass --force to overwrite)"
            ) from None
        except OSError as exc:
            raise RecordingError(f"{self.path}: cannot write: {exc.strerror}") from None
        fresh = not append or self._file.tell() == 0
        if fresh:
            self._file.write(MAGIC)
        self._last_flush = time.monotonic()
        self.bytes_written = len(MAGIC) if fresh else 0
        self.closed = False

    def write_events(self, events: Iterable[Event]) -> None:
        self._write(encode_frame(events))

    def write_frame(self, frame: Frame) -> None:
        """A frame already checked by the reader of the socket, written as is."""
        self._write(frame.encode())

    def _write(self, frame: bytes) -> None:
        if self.closed:
            return
        self._file.write(frame)
        self.bytes_written += len(frame)

    def tick(self, now: float | None = None) -> None:
        """Flush if the last flush is older than ``FLUSH_EVERY_S``."""
        now = time.monotonic() if now is None else now
        if not self.closed and now - self._last_flush >= FLUSH_EVERY_S:
            self._file.flush()
            self._last_flush = now

    def flush(self) -> None:
        if not self.closed:
            self._file.flush()
            self._last_flush = time.monotonic()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._file.close()


@dataclass
class ReadStats:
    """What a reader had to skip; each non-zero figure becomes a warning."""

    frames: int = 0
    events: int = 0
    bad_frames: int = 0
    unknown_events: int = 0
    truncated_bytes: int = 0
    warnings: list[str] = field(default_factory=list)


def read_events(path: str | os.PathLike[str], stats: ReadStats | None = None) -> Iterator[Event]:
    """Every event in a recording, in file order. Raises :class:`RecordingError` when the
    file is missing, empty, not a recording or from a newer format."""
    stats = stats if stats is not None else ReadStats()
    p = Path(path)
    try:
        f = open(p, "rb")  # noqa: SIM115
    except OSError as exc:
        raise RecordingError(f"{p}: cannot open: {exc.strerror}") from None
    with f:
        head = f.read(len(MAGIC))
        if not head:
            raise RecordingError(f"{p}: empty file, not a perftop recording")
        if head != MAGIC:
            raise RecordingError(f"{p}: not a perftop recording")
        reader = FrameReader()
        reader.feed(MAGIC)
        first = True
        while chunk := f.read(1 << 20):
            try:
                frames = reader.feed(chunk)
            except StreamError as exc:
                stats.warnings.append(f"{p}: stopped reading at a damaged frame ({exc})")
                break
            for frame in frames:
                stats.frames += 1
                try:
                    events, unknown = decode_frame(frame)
                except FrameError:
                    stats.bad_frames += 1
                    continue
                stats.unknown_events += unknown
                for ev in events:
                    if first:
                        first = False
                        _check_version(p, ev)
                    stats.events += 1
                    yield ev
        stats.bad_frames += reader.bad_frames
        stats.truncated_bytes = reader.pending
    if stats.truncated_bytes:
        stats.warnings.append(
            f"{p}: skipped a truncated tail of {stats.truncated_bytes} bytes "
            "(the recorder stopped mid-write)"
        )
    if stats.bad_frames:
        stats.warnings.append(f"{p}: skipped {stats.bad_frames} damaged frame(s)")
    if stats.unknown_events:
        stats.warnings.append(
            f"{p}: skipped {stats.unknown_events} event(s) of types this perftop does not know"
        )


def _check_version(p: Path, ev: Event) -> None:
    if isinstance(ev, SessionStart) and ev.version > FORMAT_VERSION:
        raise RecordingError(
            f"{p}: recorded with format {ev.version}; this perftop reads up to {FORMAT_VERSION}"
        )
