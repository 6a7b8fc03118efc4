"""The monitor's Unix socket: many hook connections (one per training process), one thread.

Sockets live in a per-user directory of mode 0700, each socket 0600. A connection that
sends a damaged frame loses that frame; one that breaks the stream (wrong magic, absurd
length) is closed. Both are counted; neither stops the monitor.
"""

from __future__ import annotations

import os
import selectors
import socket
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from perftop.events import Event
from perftop.wire import Frame, FrameError, FrameReader, StreamError, decode_frame

# Receives (the frame, its decoded events) for every intact frame.
FrameSink = Callable[[Frame, list[Event]], None]


def socket_dir() -> Path:
    """A private directory for this user's perftop sockets (created 0700)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    d = Path(base) / f"perftop-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    st = d.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        os.chmod(d, 0o700)
    return d


class Server:
    def __init__(self, sink: FrameSink, path: str | os.PathLike[str] | None = None) -> None:
        self.sink = sink
        if path is None:
            path = socket_dir() / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.sock"
        self.path = Path(path)
        self.rejected_frames = 0
        self.closed_streams = 0
        self.connections = 0
        self._sel = selectors.DefaultSelector()
        self._readers: dict[socket.socket, FrameReader] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self._lsock.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self._lsock.listen(64)
        self._lsock.setblocking(False)
        self._sel.register(self._lsock, selectors.EVENT_READ)

    @property
    def open_connections(self) -> int:
        return len(self._readers)

    def start(self) -> Server:
        self._thread = threading.Thread(target=self._loop, name="perftop-server", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=0.1):
                sock = key.fileobj
                if sock is self._lsock:
                    self._accept()
                else:
                    self._read(sock)  # type: ignore[arg-type]

    def _accept(self) -> None:
        try:
            conn, _ = self._lsock.accept()
        except OSError:
            return
        conn.setblocking(False)
        self._readers[conn] = FrameReader()
        self._sel.register(conn, selectors.EVENT_READ)
        self.connections += 1

    def _read(self, conn: socket.socket) -> None:
        reader = self._readers[conn]
        try:
            data = conn.recv(1 << 18)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        try:
            frames = reader.feed(data)
        except StreamError:
            self.rejected_frames += 1
            self.closed_streams += 1
            self._drop(conn)
            return
        for frame in frames:
            try:
                events, _unknown = decode_frame(frame)
            except FrameError:
                self.rejected_frames += 1
                continue
            self.sink(frame, events)
        if reader.bad_frames:
            self.rejected_frames += reader.bad_frames
            reader.bad_frames = 0

    def _drop(self, conn: socket.socket) -> None:
        self._readers.pop(conn, None)
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        for conn in list(self._readers):
            self._drop(conn)
        self._sel.close()
        self._lsock.close()
        try:
            self.path.unlink()
        except OSError:
            pass
