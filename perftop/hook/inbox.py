"""What the monitor sends back on a hook's own connection: an op capture's ask.

Read on the sender's thread at each of its wakes, after its batch: a non-blocking
``recv`` under the sender's lock taken without waiting, so neither the training thread nor
the sender ever waits for it (nor its exit's flush for the lock). The monitor sends bare frames (no
greeting); a broken stream is dropped, the connection kept.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from perftop.events import Event
from perftop.wire import MAGIC, StreamError
from perftop.wire_stream import EventReader


class Inbox:
    def __init__(self, on_event: Callable[[Event], None]) -> None:
        self.on_event = on_event
        self.on_wake: Callable[[], None] | None = None  # each wake (a pending capture's clock)
        self._reader: EventReader | None = None
        self._sock: Any = None  # the connection the reader reads

    def poll(self, sender: Any) -> None:
        """Hand what arrived to ``on_event``, then ``on_wake``; never raises."""
        try:
            for ev in self._read(sender):
                self.on_event(ev)
            if self.on_wake is not None:
                self.on_wake()
        except Exception:
            sender.errors += 1

    def _read(self, sender: Any) -> list[Event]:
        lock = sender._lock
        if not lock.acquire(blocking=False):
            return []
        try:
            sock = sender._sock
            if sock is None or not sender._greeted:
                return []
            if sock is not self._sock or self._reader is None:
                self._sock, self._reader = sock, EventReader()
                self._reader.feed(MAGIC)
            # Python waits up to a socket's timeout for data before any recv, flags or
            # not: the socket is made non-blocking for the call (its timeout kept).
            timeout = sock.gettimeout()
            sock.settimeout(0.0)
            try:
                data = sock.recv(65536, socket.MSG_DONTWAIT)
            finally:
                sock.settimeout(timeout)
            if not data:
                sender._disconnect()  # the monitor closed its end
                return []
            decoded = self._reader.feed(data)
        except (BlockingIOError, InterruptedError):
            return []
        except (OSError, StreamError):
            self._reader = None
            return []
        finally:
            lock.release()
        return [ev for _frame, events in decoded for ev in events]
