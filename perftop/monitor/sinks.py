"""Subscribers of the hub's stream that must never hold it up.

An event sink has the interface of :class:`perftop.recording.RecordingWriter`
(``write_frame``, ``write_events``, ``tick``, ``close``). A buffered sink may also have
``wants(frame)``, asked on the hub's thread (a frame it would not use is never queued, and
its thread not woken for it), and ``idle_s()``, how long its thread may sleep with nothing
queued before its next ``tick`` (None: until a frame comes). The hub calls the recording
directly (it must not lose a frame); any other sink (a viewer, a forwarder) is wrapped in a
:class:`BufferedSink`: a bounded buffer and its own thread, so a slow or stuck sink drops
and counts instead of slowing ingest or the other sinks.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Protocol

from perftop.events import Event
from perftop.wire import KIND_JSON, MAGIC, Frame, encode_frame

SINK_BUFFER_BYTES = 8 * 1024 * 1024
IDLE_S = 0.5  # a sink's tick, with nothing queued, unless it says (``idle_s``)


class EventSink(Protocol):
    def write_frame(self, frame: Frame) -> None: ...

    def write_events(self, events: Iterable[Event]) -> None: ...

    def tick(self, now: float) -> None: ...

    def close(self) -> None: ...


class BufferedSink:
    """Puts never block: over ``max_bytes`` queued, frames are dropped and counted. A sink
    whose writes fail is marked ``failed``; the hub then lets it go."""

    def __init__(self, sink: EventSink, max_bytes: int = SINK_BUFFER_BYTES, name: str = "") -> None:
        self.sink = sink
        self.max_bytes = max_bytes
        self.dropped = 0
        self.failed: BaseException | None = None
        self._q: deque[Frame | None] = deque()
        self._bytes = 0
        self._cv = threading.Condition()
        self._name = f"perftop-sink-{name or type(sink).__name__}"
        self._paused = False
        self._thread: threading.Thread | None = None
        self._wants: Callable[[Frame], bool] | None = getattr(sink, "wants", None)
        self._idle_s: Callable[[], float | None] = getattr(sink, "idle_s", lambda: IDLE_S)
        self.start()

    def start(self) -> None:
        self._paused = False
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def pause(self, timeout: float = 2.0) -> None:
        """Stop the thread, keeping the sink and what is queued (before a fork)."""
        with self._cv:
            self._paused = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def put(self, frame: Frame, force: bool = False) -> bool:
        """Queue ``frame``; ``force`` (the preamble) ignores the bound. The thread is woken
        by :meth:`kick`, or at once past a quarter of the bound or for a forced frame."""
        with self._cv:
            if self.failed is not None:
                return False
            if not force and self._wants is not None and not self._wants(frame):
                return True  # of no use to the sink: nothing to queue, no thread to wake
            if not force and self._bytes + len(frame.payload) > self.max_bytes:
                self.dropped += 1
                return False
            self._q.append(frame)
            self._bytes += len(frame.payload)
            if force or self._bytes >= self.max_bytes // 4:
                self._cv.notify()
        return True

    def kick(self) -> None:
        """Wake the thread for what was put since (the hub, once per round of items: a
        wake-up per frame cost ~0.1 ms of CPU each)."""
        with self._cv:
            if self._q:
                self._cv.notify()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._q and not self._paused:
                    self._cv.wait(self._idle_s())
                    if not self._q:
                        self._safe_tick()
                if self._paused:
                    return
                item = self._q.popleft()
                if item is not None:
                    self._bytes -= len(item.payload)
            if item is None:
                break
            try:
                self.sink.write_frame(item)
            except Exception as exc:  # a broken viewer or forwarder: stop feeding it
                with self._cv:
                    self.failed = exc
                    self._q.clear()
                    self._bytes = 0
                break
        try:
            self.sink.close()
        except Exception:
            pass

    def _safe_tick(self) -> None:
        try:
            self.sink.tick(time.monotonic())
        except Exception as exc:
            self.failed = exc

    def close(self, timeout: float = 2.0) -> None:
        """Deliver what is queued (within ``timeout``), then close the sink."""
        with self._cv:
            self._q.append(None)
            self._cv.notify()
        if self._thread is not None:
            self._thread.join(timeout)


class SocketSink:
    """A viewer's connection as an event sink: the wire stream, MAGIC first. The viewer
    is never read from: nothing it sends can reach the job."""

    def __init__(self, conn: socket.socket, timeout_s: float = 10.0) -> None:
        self.conn = conn
        conn.setblocking(True)
        conn.settimeout(timeout_s)  # a viewer that stops reading fails, then is dropped
        self._started = False

    def write_frame(self, frame: Frame) -> None:
        if not self._started:
            self._started = True
            self.conn.sendall(MAGIC)
        self.conn.sendall(frame.encode())

    def write_events(self, events: Iterable[Event]) -> None:
        data = encode_frame(events)
        self.write_frame(Frame(KIND_JSON, data[12:]))

    def tick(self, now: float) -> None:
        pass

    def close(self) -> None:
        try:
            self.conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
