"""What the output tail passes on: the job's bytes to a relay as written (ssh's pipe under
``--stream-out``), and ``output`` events as far as the rate allows (see
:mod:`perftop.monitor.outrate`; what it does not allow is left out and counted). It stands
alone because reading the files in the job's order
(:class:`~perftop.monitor.output.OutputTail`, which inherits this half) is one concern and
what leaves the tail, at what rate, another.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO

from perftop.events import Event, Output
from perftop.monitor import outrate


def relay_to(fd: int) -> Callable[[bytes], bool]:
    """A relay writing to ``fd``; False once it fails (its reader is gone): stop relaying."""

    def write(data: bytes) -> bool:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            return False
        return True

    return write


class OutputPass:
    """The tail's passing half (:class:`~perftop.monitor.output.OutputTail` inherits it)."""

    relay: Callable[[bytes], bool] | None
    left_out: int
    _buckets: dict[str, outrate.Bucket]
    _left: dict[str, int]
    _partial: dict[str, bytes]

    def _rewound(self, tail: bytes) -> bytes:
        """An unfinished line rewritten in place, held as its last state: a progress bar
        that runs for an hour is one line, not one for each ``MAX_LINE`` of its updates.
        The states it overwrote are relayed as they came, never held nor sent as events."""
        k = tail.rfind(b"\r", 0, len(tail.rstrip(b"\r")))
        if k <= 0:
            return tail
        self._relay(tail[:k])
        return tail[k:]

    def _relay(self, data: bytes) -> None:
        if self.relay is not None and data and not self.relay(data):
            self.relay = None  # its reader is gone: the job's output goes on here

    def _admit(self, name: str, f: IO[bytes], mono: float, end: int) -> int:
        """How many bytes of ``name``'s file up to ``end`` this read takes, ``READ_MAX`` at
        most: asked of the rate once per stream per read, however many pieces it is read
        in. Without a relay, what the rate does not allow is skipped unread (the oldest, so
        the newest is kept), and counted."""
        pos = f.tell()
        avail = end - pos
        if avail <= 0:
            return 0
        want = min(avail, outrate.READ_MAX)
        if self.relay is not None:
            return want
        allowed = self._buckets[name].allow(want, mono)
        if allowed < avail:
            self._left[name] += avail - allowed + len(self._partial[name])
            self.left_out += avail - allowed + len(self._partial[name])
            self._partial[name] = b""  # the rest of its line is left out
            f.seek(pos + avail - allowed)
        return allowed

    def _emit(
        self,
        name: str,
        head: bytes,
        now: float,
        mono: float,
        out: list[Event],
        end_line: bool = False,
    ) -> None:
        """``head`` relayed as the job wrote it (``end_line``, the job's last: ended with
        a newline if it was not, so that perftop's own lines start theirs), and as events
        in pieces of ``EVENT_MAX`` bytes, as far as the rate allows (with a relay: what it
        reads is over the rate only here)."""
        if self.relay is not None:
            self._relay(head if head[-1:] == b"\n" or not end_line else head + b"\n")
            allowed = self._buckets[name].allow(len(head), mono)
            if allowed < len(head):
                self._left[name] += len(head) - allowed
                self.left_out += len(head) - allowed
                head = head[:allowed]
        for piece in outrate.pieces(head):
            out.append(Output(now, name, piece.decode("utf-8", "replace")))
