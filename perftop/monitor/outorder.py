"""The order in which the job wrote its stdout and stderr files (see
:mod:`perftop.monitor.output`), from the kernel's own record of the writes (inotify).

The job writes to two ordinary files, and a file keeps no time of its writes: read at each
poll, one stream's lines all came before the other's, whichever the job wrote first (a
job's end-of-run stdout block showed above the stderr lines it wrote before it). Each
``write(2)`` to a watched file queues an ``IN_MODIFY`` event, in order, one queue for both
files; the reader wakes at the first write instead of the next poll, and reads the streams
in the order they were written.

The order is exact when the reader keeps up with the writes (it wakes on each one): what
one stream wrote, then the other, between two wake-ups is read in the order of each
stream's first write, with the writes that came while the read's sizes were taken.
Without inotify (or when its queue overflowed), the streams are read in a fixed order, as
before, at each poll. Nothing here touches the job or its files.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
from collections.abc import Callable

from perftop.monitor.wakepipe import WakePipe

IN_MODIFY = 0x00000002
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (a file's watch has no name)


class WriteOrder:
    """Which of ``paths`` (name → path) were written, in the order they were written."""

    def __init__(self, paths: dict[str, str]) -> None:
        self.names = list(paths)
        self._wds: dict[int, str] = {}
        # streams written after a read's sizes were taken -> their sizes then: the next
        # read takes them that far first (those bytes came before anything written since)
        self._carried: dict[str, int] = {}
        self.fd = -1
        self._waker = WakePipe()
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        for name, path in paths.items():
            wd = libc.inotify_add_watch(fd, os.fsencode(path), IN_MODIFY)
            if wd < 0:
                os.close(fd)
                self._wds = {}
                return
            self._wds[wd] = name
        self.fd = fd

    def wait(self, timeout: float) -> list[str]:
        """The names written since the last call, in the order of their first write (none
        when it timed out); waits up to ``timeout`` for a write (the whole of it without
        inotify), none where a late write is to be read (:meth:`heads`)."""
        fds = [self._waker.r] + ([self.fd] if self.fd >= 0 else [])
        try:
            ready, _, _ = select.select(fds, [], [], 0.0 if self._carried else timeout)
        except (OSError, ValueError):
            ready = []
        if self._waker.r in ready:
            self._waker.drain()
        written: list[str] = []
        for name in self._drain() if self.fd in ready else []:
            if name not in written:
                written.append(name)
        return written

    def heads(self) -> dict[str, int]:
        """The streams the last read found written after its sizes were taken, in the order
        of those writes, each with its size then: to read that far before anything else
        (what either stream wrote since came after). Once: the next read's."""
        heads, self._carried = self._carried, {}
        return heads

    def settle(
        self, written: list[str], ends: dict[str, int], sizes: Callable[[], dict[str, int]]
    ) -> list[str]:
        """The order to read in, once the sizes to read up to (``ends``) were taken: those
        ``written`` (from :meth:`wait`), then those whose writes came since, in their order,
        then the rest. A wait that timed out just before the job wrote both streams found no
        write: the writes' events came here, and read in a fixed order, stdout went above
        the stderr written before it. A late write to a stream that grew past its end is
        carried to the next read, up to the size it has now (:meth:`heads`): put first in
        that read whole, the stream's newer writes went above the other's written before
        them (CI, a loaded VM: "ERR 1" above "OUT 1"). The others are in this read (left
        queued, they would put a stream first in the next read that another wrote to
        first)."""
        late = self._drain() if self.fd >= 0 else []
        order = written + [n for n in late if n not in written]
        if late:
            now = sizes()
            self._carried = {n: now[n] for n in late if now[n] != ends[n]}
        return order + [n for n in self.names if n not in order]

    def wake(self) -> None:
        """End a :meth:`wait` now (the tail stops or pauses, or a prompt is to be shown);
        that wait takes the wake-up back."""
        self._waker.wake()

    def _drain(self) -> list[str]:
        written: list[str] = []
        size = 1024 * _EVENT.size
        while True:
            try:
                buf = os.read(self.fd, size)
            except OSError:  # nothing more (EAGAIN), or the fd is gone
                return written
            for off in range(0, len(buf) - _EVENT.size + 1, _EVENT.size):
                wd, mask, _, length = _EVENT.unpack_from(buf, off)
                if length:  # never for a file's own watch
                    return written
                name = self._wds.get(wd)  # None for IN_Q_OVERFLOW: its order is lost
                if name is not None and name not in written:
                    written.append(name)
            if len(buf) < size:
                return written

    def rearm(self) -> None:
        """Take back the wake-ups sent (a paused tail starts again)."""
        self._waker.drain()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = -1
        self._waker.close()
