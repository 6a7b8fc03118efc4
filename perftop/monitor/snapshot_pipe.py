"""Snapshots to a TUI in a process of its own, through a pipe.

Why: a collector holding hundreds of ranks spends most of a core on its ingest and its 2 Hz
snapshot. With the TUI in the same process they share one GIL, and a key press waits
behind them (p95 350 ms at 512 ranks). In a process of its own the TUI only unpickles a
snapshot and renders it.

The pipe is an anonymous one between perftop and the child it started, so pickle is safe
here (nothing else can write to it). Each snapshot goes as a 4-byte length and a pickle;
only the newest waiting snapshot is sent, so a busy TUI skips ahead instead of falling
behind, and the sender's thread is the only one that ever waits on the pipe.
"""

from __future__ import annotations

import os
import pickle
import struct
import threading
from collections.abc import Iterator
from dataclasses import replace

from perftop.model import Snapshot

LENGTH = struct.Struct(">I")


def lean(snap: Snapshot) -> Snapshot:
    """What a TUI draws: the shown process's recent steps (the chart) and every rank's
    figures, without each rank's own window of recent steps (40x the bytes at 512 ranks)."""
    if not any(r.recent for r in snap.ranks):
        return snap
    return replace(snap, ranks=tuple(replace(r, recent=()) if r.recent else r for r in snap.ranks))


class SnapshotSender:
    """Writes snapshots to ``fd`` from a thread of its own; ``send`` never waits."""

    def __init__(self, fd: int) -> None:
        self._out = os.fdopen(fd, "wb", buffering=0)
        self._cv = threading.Condition()
        self._next: Snapshot | None = None
        self._closing = False
        self.sent = 0
        self.skipped = 0  # replaced by a newer one before they were sent
        self.failed = 0  # could not be pickled
        self.gone = threading.Event()  # the reader went away
        self._thread = threading.Thread(target=self._loop, name="perftop-tui-pipe", daemon=True)
        self._thread.start()

    def send(self, snap: Snapshot) -> None:
        with self._cv:
            if self._next is not None:
                self.skipped += 1
            self._next = snap
            self._cv.notify()

    def close(self, timeout: float = 5.0) -> None:
        """Send what is waiting, then end the stream (the reader sees its end)."""
        with self._cv:
            self._closing = True
            self._cv.notify()
        self._thread.join(timeout)

    def _loop(self) -> None:
        try:
            while True:
                with self._cv:
                    while self._next is None and not self._closing:
                        self._cv.wait()
                    snap, self._next = self._next, None
                if snap is None:
                    return
                try:
                    data = pickle.dumps(lean(snap), protocol=pickle.HIGHEST_PROTOCOL)
                except (pickle.PicklingError, TypeError, AttributeError):
                    self.failed += 1  # a model bug must not freeze the screen: the next one
                    continue
                self._out.write(LENGTH.pack(len(data)) + data)
                self.sent += 1
        except OSError:  # the TUI has gone (a broken pipe): nobody to draw for
            self.gone.set()
        finally:
            try:
                self._out.close()
            except OSError:
                pass


def read_snapshots(fd: int) -> Iterator[Snapshot]:
    """The snapshots a :class:`SnapshotSender` writes to the other end, until it closes."""
    with os.fdopen(fd, "rb") as f:
        while len(head := f.read(LENGTH.size)) == LENGTH.size:
            (n,) = LENGTH.unpack(head)
            data = f.read(n)
            if len(data) < n:
                return
            yield pickle.loads(data)
