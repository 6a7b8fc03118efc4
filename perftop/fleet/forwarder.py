"""The forwarder: an event sink that ships a node's session to a collector over TCP.

It has the interface of :class:`perftop.recording.RecordingWriter`, so the ingest feeds it
as it feeds the recording: the same wire frames. The ingest thread only appends encoded
frames to a bounded buffer; a background thread connects, proves the token, and sends.
When the collector is slow, away or refuses, new frames are dropped and counted, never
waited for: the node and its training go on. The thread reconnects with backoff, and
after a reconnect it first re-sends what a fresh collector needs to read the node (the
session, the job, the trainers, the loaders: the latest of each).
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable

from perftop.events import (
    Dropped,
    Event,
)
from perftop.fleet import link
from perftop.monitor.header import Header
from perftop.wire import (
    HEADER,
    KIND_JSON,
    MAGIC,
    Frame,
    FrameError,
    decode_payload,
    encode_frame,
)

MAX_BUFFER = 16 * 1024 * 1024  # bytes of frames held while the collector is away
BACKOFF_S = (0.5, 30.0)
CONNECT_TIMEOUT_S = 5.0
SEND_TIMEOUT_S = 10.0
CLOSE_DRAIN_S = 3.0


class Forwarder:
    """A sink (``write_frame``, ``write_events``, ``tick``, ``close``) that never blocks."""

    def __init__(
        self,
        addr: tuple[str, int],
        token: str,
        *,
        host: str | None = None,
        max_buffer: int = MAX_BUFFER,
        log: Callable[[str], None] = lambda s: None,
    ) -> None:
        self.addr = addr
        self.token = token
        self.host = host or link.node_host()
        self.session = uuid.uuid4().hex
        self.max_buffer = max_buffer
        self._log = log
        self._buf: deque[bytes] = deque()
        self._bytes = 0
        self._cv = threading.Condition()
        # The events that describe the session, by the hub's own rule (bounded like it).
        self._sticky = Header(history_bytes=0)
        self.dropped_frames = 0
        self.sent_frames = 0
        self.connects = 0
        self.refused = ""  # why the collector last refused us
        self._dropped_told = 0
        self._closing = False
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name="perftop-forward", daemon=True)
        self._thread.start()

    # -- the sink (ingest thread): append or drop, never wait --------------------------
    def write_frame(self, frame: Frame) -> None:
        self._put(frame.encode(), frame)

    def write_events(self, events: Iterable[Event]) -> None:
        events = list(events)
        with self._cv:
            self._sticky.add(None, events)  # already decoded: cheap to remember
        self._put(encode_frame(events), None)

    def tick(self, now: float | None = None) -> None:
        pass

    def _put(self, data: bytes, frame: Frame | None) -> None:
        with self._cv:
            if self._closing:
                return
            if self._bytes + len(data) > self.max_buffer:
                self.dropped_frames += 1
                if frame is not None:
                    self._keep_sticky(frame)  # a dropped hello must still reach it later
                return
            self._buf.append(data)
            self._bytes += len(data)
            if frame is not None and frame.kind == KIND_JSON:
                self._buf.append(b"")  # marker: the frame before is scanned when sent
            self._cv.notify()

    def _keep_sticky(self, frame: Frame) -> None:
        if frame.kind != KIND_JSON:
            return
        try:
            events, _ = decode_payload(frame.payload)
        except FrameError:
            return
        self._sticky.add(None, events)

    def close(self) -> None:
        """Send what is buffered (at most ``CLOSE_DRAIN_S``), then stop."""
        with self._cv:
            self._closing = True
            self._cv.notify()
        deadline = time.monotonic() + CLOSE_DRAIN_S
        while time.monotonic() < deadline:
            with self._cv:
                if not self._buf or self._sock is None:
                    break
            time.sleep(0.02)
        self._stop.set()
        with self._cv:
            self._cv.notify()
        self._thread.join(timeout=SEND_TIMEOUT_S)

    # -- the background thread ----------------------------------------------------------
    def _run(self) -> None:
        delay = BACKOFF_S[0]
        while not self._stop.is_set():
            try:
                self._sock = self._connect()
            except (OSError, ValueError) as exc:
                self._failed(str(exc) or type(exc).__name__)
                if self._closing:
                    return
                self._stop.wait(delay)
                delay = min(delay * 2, BACKOFF_S[1])
                continue
            delay = BACKOFF_S[0]
            try:
                self._pump(self._sock)
            except OSError as exc:
                self._log(f"perftop: lost the collector at {self._where}: {exc}; reconnecting")
            except Exception as exc:  # a bug of ours: never let it end forwarding silently
                self._log(f"perftop: forwarding error: {type(exc).__name__}: {exc}")
                self._stop.wait(delay)
            finally:
                self._sock.close()
                self._sock = None

    @property
    def _where(self) -> str:
        return f"{self.addr[0]}:{self.addr[1]}"

    def _failed(self, why: str) -> None:
        if why != self.refused:  # say each new reason once, not every retry
            self.refused = why
            self._log(f"perftop: cannot forward to {self._where}: {why}; retrying")

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.addr, timeout=CONNECT_TIMEOUT_S)
        try:
            f = sock.makefile("rb")
            nonce = link.parse_greeting(f.readline(link.MAX_LINE))
            sock.sendall(link.hello_line(self.token, nonce, self.session, self.host))
            answer = f.readline(link.MAX_LINE).decode(errors="replace").strip()
            if answer != "OK":
                why = answer.removeprefix("DENIED").strip()[:200] or "connection closed"
                raise ValueError(f"the collector refused this node: {why}")
            sock.settimeout(SEND_TIMEOUT_S)
            sock.sendall(MAGIC + self._preamble())
        except BaseException:
            sock.close()
            raise
        self.connects += 1
        if self.refused or self.connects == 1:
            self._log(f"perftop: forwarding to {self._where} as {self.host}")
        self.refused = ""
        return sock

    def _preamble(self) -> bytes:
        """After a reconnect: what a fresh collector needs, and the drops so far."""
        with self._cv:
            events: list[Event] = self._sticky.described() if self.connects else []
            dropped = self.dropped_frames
        if dropped:
            events.append(Dropped(time.time(), os.getpid(), dropped, "forward"))
        return encode_frame(events) if events else b""

    def _pump(self, sock: socket.socket) -> None:
        while True:
            with self._cv:
                while not self._buf and not self._stop.is_set():
                    self._cv.wait(0.5)
                    if _peer_gone(sock):
                        raise ConnectionResetError("the collector closed the link")
                if not self._buf:
                    return  # stopped with nothing left
                if _peer_gone(sock):  # keep the batch for the next link, not a dead one
                    raise ConnectionResetError("the collector closed the link")
                batch = list(self._buf)
                self._buf.clear()
                self._bytes = 0
                dropped = self.dropped_frames
            with self._cv:
                for i, data in enumerate(batch):
                    if not data and i:  # the frame before was JSON: keep its sticky events
                        self._keep_sticky(_frame_of(batch[i - 1]))
            payload = b"".join(batch)
            try:
                sock.sendall(payload)
            except OSError:
                with self._cv:
                    self.dropped_frames += sum(1 for d in batch if d)
                raise
            self.sent_frames += sum(1 for d in batch if d)
            if dropped != self._dropped_told:
                self._dropped_told = dropped
                sock.sendall(encode_frame([Dropped(time.time(), os.getpid(), dropped, "forward")]))


def _peer_gone(sock: socket.socket) -> bool:
    """The collector never writes after ``OK``: anything readable is its EOF or reset.
    Checked before each send, since TCP accepts a first send into a closed link."""
    if not isinstance(sock, socket.socket):
        return False  # a pipe: a closed reader shows as a failed write
    try:
        readable, _, _ = select.select([sock], [], [], 0)  # a timed socket's recv would wait
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except (OSError, ValueError):
        return True


def _frame_of(data: bytes) -> Frame:
    _, _, kind = HEADER.unpack_from(data)
    return Frame(kind, data[HEADER.size :])
