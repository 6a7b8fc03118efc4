"""Recording files: append-only framed events, flushed at least once a second.

The file holds the socket's frames (see :mod:`perftop.wire`), compressed, so a replay is
just another source of the same events. A crash of the writer loses at most the unflushed
half second; a reader (:mod:`perftop.reader`) skips a truncated tail, or a damaged frame
and reads on at the next good one, with a warning.
"""

from __future__ import annotations

import contextlib
import os
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

from perftop.errors import RecordingError
from perftop.events import Event
from perftop.reader import FrameScanner, ReadStats, open_recording
from perftop.wire import (
    FIT_FRAME,
    HEADER,
    KIND_ZLIB,
    MAGIC,
    MAX_FRAME,
    ZLIB_START,
    Frame,
    fitted_frames,
)

FLUSH_EVERY_S = 0.5
PENDING_MAX = 1 << 20  # bytes held before a flush is forced
SEGMENT_BYTES = 32 << 10  # input per deflate stream: a damaged byte costs at most this
# zlib's fastest level: on a recording of a tight loop's packed steps it compresses 4.4x
# faster than level 6, to a ratio of 3.33 against 3.35 (docs/benchmarks.md, eighth round)
LEVEL = 1
SUFFIX = ".perftop"


class DefaultPath(type(Path())):  # type: ignore[misc]
    """A name perftop chose (not the user): the writer takes the first free one of
    ``NAME.perftop``, ``NAME-2.perftop``, ... and never overwrites, ``--force`` or not."""


def default_path(now: float | None = None) -> Path:
    """A timestamped recording name in the current directory (see :class:`DefaultPath`)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return DefaultPath(f"perftop-{stamp}{SUFFIX}")


def _create(path: Path, force: bool, append: bool) -> tuple[Path, int]:
    """Open ``path`` for writing, exclusively created unless ``force`` or ``append``; a
    :class:`DefaultPath` moves on to the next free name instead of failing. Mode 0600: a
    recording holds the job's command line and output."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    unique = isinstance(path, DefaultPath)
    if unique or not (force or append):
        flags |= os.O_EXCL
    if append:
        flags |= os.O_APPEND
    candidate, n = Path(path), 1
    while True:
        try:
            fd = os.open(candidate, flags, 0o600)
            break
        except FileExistsError:
            if not unique:
                raise
            n += 1
            candidate = path.with_name(f"{path.name.removesuffix(SUFFIX)}-{n}{SUFFIX}")
    return candidate, fd


try:
    import fcntl
except ImportError:  # Windows: `perftop report` and `replay` run there; nothing records
    fcntl = None  # type: ignore[assignment]


def _lock(path: Path, fd: int) -> None:
    """Hold the recording's lock while this writer (or its forked background monitor)
    lives: no second live session writes into the same file, ``--force`` or not."""
    if fcntl is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RecordingError(
            f"{path}: a live perftop session is recording to it (choose another --record FILE)"
        ) from None
    except OSError:  # a filesystem without locks: record unlocked
        pass


class RecordingWriter:
    """Appends frames to a file; the owner calls :meth:`tick` often so data hits the OS.

    Frames are held for up to ``FLUSH_EVERY_S`` and written as one compressed frame (a
    sync-flushed deflate stream that restarts every ``SEGMENT_BYTES``: where a replay may
    seek), so a week of steps and probe samples stays small; ``compress=False`` writes the
    frames as they are."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        force: bool = False,
        append: bool = False,
        compress: bool = True,
        on_close: Callable[[Path], object] | None = None,
    ) -> None:
        """``append`` continues an existing recording (a background recorder taking over
        from the TUI); the header is written only when the file is new or empty.
        ``on_close(path)`` runs once the file is complete: the monitor saves the replay
        index beside it (:func:`perftop.replay.autosave.index_after_recording`)."""
        if Path(path).is_dir():  # --force could not help: say what would
            raise RecordingError(
                f"{path}: is a directory; name a file to record to, "
                f"e.g. {Path(path) / ('run' + SUFFIX)}"
            )
        try:
            self.path, fd = _create(path if isinstance(path, Path) else Path(path), force, append)
        except FileExistsError:
            raise RecordingError(f"{path}: already exists (pass --force to overwrite)") from None
        except OSError as exc:
            raise RecordingError(f"{path}: cannot write: {exc.strerror}") from None
        _lock(self.path, fd)
        if force and not append:
            os.ftruncate(fd, 0)  # only once the lock says no live session writes here
            with contextlib.suppress(OSError):  # another user's file we may write: as it is
                os.fchmod(fd, 0o600)  # an old file reused: its mode as a new one's
        self._file = os.fdopen(fd, "ab" if append else "wb")  # closed in close()
        fresh = not append or self._file.tell() == 0
        if fresh:
            self._file.write(MAGIC)
        self._last_flush = time.monotonic()
        self.bytes_written = len(MAGIC) if fresh else 0
        self.closed = False
        self.compress = compress
        self.on_close = on_close
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._deflate: Any = None
        self._segment = 0
        self.error: str | None = None  # why writing stopped before close (a full disk)
        self.refused = 0  # frames over the reader's limit, never written (none come)

    def _fail(self, exc: OSError) -> NoReturn:
        """A write failed: stop writing for good (what is in the file stays readable) and
        raise one :class:`RecordingError` naming the file; the hub cuts the recording off."""
        self.error = exc.strerror or str(exc)
        self.closed = True
        self._pending.clear()
        try:
            self._file.close()
        except OSError:  # its buffer cannot reach the disk either
            pass
        raise RecordingError(f"{self.path}: cannot write: {self.error}") from None

    def write_events(self, events: Iterable[Event]) -> None:
        frames, left_out = fitted_frames(events)
        self.refused += left_out
        for frame in frames:
            self._write(frame.encode())

    def write_frame(self, frame: Frame) -> None:
        """A frame already checked by the reader of the socket, written as is."""
        self._write(frame.encode())

    def _write(self, frame: bytes) -> None:
        if self.closed:
            return
        if len(frame) > HEADER.size + MAX_FRAME:  # one no reader takes: left out, counted
            self.refused += 1
            return
        if not self.compress or len(frame) > HEADER.size + FIT_FRAME:
            # A frame too big to compress safely (deflate may grow it past the reader's
            # limit) goes as it is, between two deflate streams.
            self._emit()
            self._deflate = None
            self._raw(frame)
            return
        if self._pending and self._pending_bytes + len(frame) > PENDING_MAX:
            self._emit()  # what one compressed frame holds stays under FIT_FRAME
        self._pending.append(frame)
        self._pending_bytes += len(frame)
        if self._pending_bytes >= PENDING_MAX:
            self._emit()

    def _emit(self) -> None:
        """The held frames as one compressed frame, continuing the current stream."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        flag = 0
        if self._deflate is None or self._segment >= SEGMENT_BYTES:
            self._deflate = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
            self._segment, flag = 0, ZLIB_START
        self._segment += len(data)
        body = self._deflate.compress(data) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
        payload = bytes((flag,)) + body
        self._raw(HEADER.pack(len(payload), zlib.crc32(payload), KIND_ZLIB) + payload)

    def _raw(self, out: bytes) -> None:
        try:
            self._file.write(out)
        except OSError as exc:
            self._fail(exc)
        self.bytes_written += len(out)

    def tick(self, now: float | None = None) -> None:
        """Flush if the last flush is older than ``FLUSH_EVERY_S``."""
        now = time.monotonic() if now is None else now
        if not self.closed and now - self._last_flush >= FLUSH_EVERY_S:
            self._emit()
            self._flush_file()
            self._last_flush = now

    def _flush_file(self) -> None:
        try:
            self._file.flush()
        except OSError as exc:
            self._fail(exc)

    def flush(self) -> None:
        """Everything held written to the OS now (before the monitor forks: see
        ``monitor.lifecycle.detach``, so neither process writes it twice)."""
        if not self.closed:
            self._emit()
            self._flush_file()
            self._last_flush = time.monotonic()

    def close(self) -> None:
        if not self.closed:
            self._emit()
            self._flush_file()
            self.closed = True
            self._file.close()
            if self.on_close is not None and self.bytes_written > len(MAGIC):
                self.on_close(self.path)


def read_events(
    path: str | os.PathLike[str], stats: ReadStats | None = None, *, batch: bool = False
) -> Iterator[Event]:
    """Every event in a recording, in file order. Raises :class:`RecordingError` when the
    file is missing, empty, not a recording or from a newer format. ``batch``: a frame of
    packed steps as one :class:`~perftop.wire.StepBatch` (for a model that folds it)."""
    stats = stats if stats is not None else ReadStats()
    p, f, size = open_recording(path)
    with f:
        for chunk in FrameScanner(p, f, size, stats, batch).chunks():
            yield from chunk.events
    finish_stats(p, stats)


def _lost_steps(stats: ReadStats) -> str:
    """How many steps went with the damage: "at least" where it came after a process's
    last step read, and no count where nothing read tells one."""
    n = stats.skipped_steps
    if not stats.steps_uncounted:
        return f"{n} steps"
    return f"at least {n} steps" if n else "an unknown number of steps"


def finish_stats(p: Path, stats: ReadStats) -> None:
    """Turn what a reader skipped into warnings (once, at the end of a read)."""
    if stats.truncated_bytes:
        stats.warnings.append(
            f"{p}: skipped a truncated tail of {stats.truncated_bytes} bytes "
            "(the recorder stopped mid-write)"
        )
    if stats.damaged:
        stats.warnings.append(
            f"{p}: skipped {stats.skipped_bytes} damaged bytes at {stats.damaged} place(s), "
            f"{_lost_steps(stats)} with them; read on after each"
        )
    elif stats.skipped_steps or stats.steps_uncounted:
        # No place lost, yet whole frames went (a flipped kind, a bad inner frame) and with
        # them steps: said here, or a loss after the last step read would go unmentioned.
        stats.warnings.append(f"{p}: {_lost_steps(stats)} went with the frames skipped")
    if stats.bad_frames:
        stats.warnings.append(f"{p}: skipped {stats.bad_frames} damaged frame(s)")
    if stats.unknown_events:
        stats.warnings.append(
            f"{p}: skipped {stats.unknown_events} event(s) of types this perftop does not know"
        )
