"""The collector's TCP server: forwarders from many nodes, one thread, token required.

A source like :mod:`perftop.monitor.server`, over TCP: each connection is greeted with a
nonce and must prove the token (:mod:`perftop.fleet.link`) before a byte of its stream is
read. A refused connection is logged (a note in the session, a line on stderr) and closed.
Each accepted node's frames reach the ingest wrapped as node frames, so the recording keeps
whose events they are and the model keeps one session per node (pids collide across
hosts). A node that reconnects (same session id) keeps its name.
"""

from __future__ import annotations

import secrets
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from perftop.console import say
from perftop.errors import UsageError
from perftop.events import Event, NodeLink, NodeScope, Note
from perftop.fleet import link
from perftop.fleet.refusals import REASONS, Refusals
from perftop.monitor.wakepipe import WakePipe
from perftop.wire import Frame, StreamError, encode_node_frame
from perftop.wire_stream import EventReader

HANDSHAKE_S = 10.0  # a connection that has not proved the token by then is dropped
# The longest select() while no handshake is due: a node's frames, a connection and
# close() (the wake pipe) end it at once, so an idle collector wakes no more than this.
IDLE_S = 5.0


@dataclass
class _Conn:
    sock: socket.socket
    peer: str
    nonce: str
    opened: float
    line: bytearray = field(default_factory=bytearray)
    node: str = ""  # set once the token checked
    reader: EventReader | None = None


class Collector:
    """``submit_frame(frame, events)`` and ``submit(*events)`` are the ingest's."""

    def __init__(
        self,
        addr: tuple[str, int],
        token: str,
        submit_frame: Callable[[Frame, list[Event]], object],
        submit: Callable[..., None],
        *,
        log: Callable[[str], None] = say,
    ) -> None:
        self.token = token
        self._submit_frame = submit_frame
        self._submit = submit
        self._log = log
        self.refused = 0
        self.rejected_frames = 0
        self._names: dict[str, str] = {}  # forwarder session id -> node name
        self._refusals = Refusals()  # which refusals are told
        self._conns: dict[socket.socket, _Conn] = {}
        self._sel = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self._lsock = socket.socket(family, socket.SOCK_STREAM)
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._lsock.bind(addr)
        except OSError as exc:
            self._lsock.close()
            raise UsageError(f"cannot listen on {addr[0]}:{addr[1]}: {exc.strerror}") from None
        self._lsock.listen(64)
        self._lsock.setblocking(False)
        self._sel.register(self._lsock, selectors.EVENT_READ)
        self._wake = WakePipe()
        self._sel.register(self._wake, selectors.EVENT_READ)
        self.address: tuple[str, int] = self._lsock.getsockname()[:2]

    @property
    def nodes_connected(self) -> int:
        return sum(1 for c in self._conns.values() if c.node)

    def start(self) -> Collector:
        self._thread = threading.Thread(target=self._loop, name="perftop-collect", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=self._next_wake()):
                if key.fileobj is self._lsock:
                    self._accept()
                elif key.fileobj is self._wake:
                    self._wake.drain()
                elif (c := self._conns.get(key.fileobj)) is not None:  # type: ignore[call-overload]
                    self._read(c)
            now = time.monotonic()
            for c in [c for c in self._conns.values() if not c.node]:
                if now - c.opened >= HANDSHAKE_S:
                    self._refuse(c, "no handshake in time")

    def _next_wake(self) -> float:
        """Seconds until the first handshake falls due, IDLE_S when none is pending."""
        opened = [c.opened for c in self._conns.values() if not c.node]
        if not opened:
            return IDLE_S
        return min(IDLE_S, max(0.0, min(opened) + HANDSHAKE_S - time.monotonic()))

    def _accept(self) -> None:
        try:
            sock, peer = self._lsock.accept()
        except OSError:
            return
        c = _Conn(sock, f"{peer[0]}:{peer[1]}", secrets.token_hex(16), time.monotonic())
        try:
            sock.sendall(link.greeting(c.nonce))  # a few bytes into an empty buffer
        except OSError:
            sock.close()
            return
        sock.setblocking(False)
        self._conns[sock] = c
        self._sel.register(sock, selectors.EVENT_READ)

    def _read(self, c: _Conn) -> None:
        try:
            data = c.sock.recv(1 << 18)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(c)
            return
        if not c.node:
            data = self._handshake(c, data)
            if not data:
                return
        if c.reader is None:  # cannot happen: the handshake sets it
            return
        try:
            decoded = c.reader.feed(data)
        except StreamError:
            self._drop(c)
            return
        finally:
            self.rejected_frames += c.reader.rejected
            c.reader.rejected = 0
        for frame, events in decoded:
            if frame.kind not in (0, 1):  # a node frame from a node: not ours to nest
                self.rejected_frames += 1
                continue
            self._submit_frame(encode_node_frame(c.node, frame), list(_scoped(c.node, events)))

    def _handshake(self, c: _Conn, data: bytes) -> bytes:
        """Consume the hello line; what follows it is stream data."""
        c.line += data
        nl = c.line.find(b"\n")
        if nl < 0:
            if len(c.line) > link.MAX_LINE:
                self._refuse(c, "not a perftop forwarder")
            return b""
        line, rest = bytes(c.line[:nl]), bytes(c.line[nl + 1 :])
        c.line.clear()
        try:
            session, host = link.check_hello(line, self.token, c.nonce)
        except ValueError as exc:
            self._refuse(c, str(exc))
            return b""
        c.node = self._name(session, host)
        c.reader = EventReader()
        try:
            c.sock.sendall(b"OK\n")
        except OSError:
            self._drop(c)
            return b""
        self._submit(NodeLink(time.time(), c.node, True, c.peer, host))
        return rest

    def _name(self, session: str, host: str) -> str:
        """The node's name: its host, made unique among nodes; kept across reconnects."""
        name = self._names.get(session)
        if name is None:
            taken = set(self._names.values())
            name, n = host, 2
            while name in taken:
                name, n = f"{host}#{n}", n + 1
            self._names[session] = name
        return name

    def _refuse(self, c: _Conn, why: str) -> None:
        """Log a refusal: a note and a stderr line the first time, and again at 10, 100,
        ... refusals of the same peer (a forwarder retries), a few a minute at most, with
        no word of the peer's own (``refusals.py``)."""
        self.refused += 1
        ip = c.peer.rpartition(":")[0]
        if why not in REASONS:
            why = REASONS[1]
        text = self._refusals.refuse(ip, why)
        if text is not None:
            self._log(f"perftop: {text}")
            self._submit(Note(time.time(), "warning", "collect", text))
        try:
            c.sock.sendall(f"DENIED {why}\n".encode())
        except OSError:
            pass
        self._drop(c)

    def _drop(self, c: _Conn) -> None:
        self._conns.pop(c.sock, None)
        try:
            self._sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()
        if c.node:
            self._submit(NodeLink(time.time(), c.node, False, c.peer))

    def close(self) -> None:
        self._stop.set()
        self._wake.wake()
        if self._thread is not None:
            self._thread.join(timeout=2)
        for c in list(self._conns.values()):
            self._drop(c)
        self._sel.close()
        self._lsock.close()
        self._wake.close()


def _scoped(node: str, events: list[Event]) -> list[Event]:
    return [NodeScope(node), *events, NodeScope("")]
