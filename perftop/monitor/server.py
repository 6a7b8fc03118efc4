"""The monitor's Unix socket: many hook connections (one per training process), viewers and
``perftop ls`` requests, one thread.

Sockets live in a per-user directory of mode 0700 made safely (``sockdir.py``), each socket
0600, and a peer of another user is refused (SO_PEERCRED, ``perftop.peer``). The first 8 bytes say who connects: the stream's MAGIC is a
hook (a producer); ``VIEW_MAGIC`` is a viewer, handed to ``on_viewer`` and never read from
again (read-only: nothing it sends reaches the job); ``INFO_MAGIC`` gets one JSON line
about the session; ``CTRL_MAGIC`` is a control client (``perftop trace``, an attached
viewer started with ``--allow-control``), handed to ``on_control`` with the bytes after its
greeting. The one thing that flows to a hook, a capture's ask, goes to the training
processes' own connections (:meth:`Server.send_to_trainers`), never to DataLoader workers. A connection that sends a damaged frame loses that frame; one that
breaks the stream (unknown greeting, absurd length) is closed. Both are counted; neither
stops the monitor.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perftop.events import Event, Hello
from perftop.monitor.sockpath import SUFFIX, socket_dir
from perftop.monitor.wakepipe import WakePipe
from perftop.peer import peer_cred
from perftop.wire import MAGIC, Frame, StreamError
from perftop.wire_stream import EventReader

# Receives (the frame, its decoded events) for every intact frame.
FrameSink = Callable[[Frame, list[Event]], Any]
VIEW_MAGIC = b"PTVIEW\x00\x00"
INFO_MAGIC = b"PTINFO\x00\x00"
CTRL_MAGIC = b"PTCTRL\x00\x00"
IDLE_S = 5.0  # select()'s timeout: a safety net only (peers and the wake pipe end it)
SETTLE_S = 1.0  # the most Server.settle waits for hooks' hellos (a hook sends it first)
LAST_READS_S = 1.0  # the most a close spends reading what hooks sent before it


class Server:
    def __init__(
        self,
        sink: FrameSink,
        path: str | os.PathLike[str] | None = None,
        *,
        on_viewer: Callable[[socket.socket], None] | None = None,
        info: Callable[[], dict[str, Any]] | None = None,
        on_control: Callable[[socket.socket, bytes], None] | None = None,
    ) -> None:
        self.sink = sink
        self.on_control = on_control
        self.on_viewer = on_viewer
        self.info = info
        if path is None:
            path = socket_dir() / f"{os.getpid()}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        self.path = Path(path)
        self.rejected_frames = 0
        self.closed_streams = 0
        self.refused_peers = 0
        self.connections = 0
        self.viewers = 0
        # pids that connected (a hook connects once a torch import arms it, before any
        # hello): how the monitor tells a process whose hook never started (see hookless)
        self.peer_pids: set[int] = set()  # the job's processes that connected (not viewers)
        # ... less the DataLoader workers (by their hello): the processes a job's end waits
        # for (a worker outliving its killed training is no training that went on)
        self.job_pids: set[int] = set()
        self._pid_of: dict[socket.socket, int] = {}
        self._sel = selectors.DefaultSelector()
        self._readers: dict[socket.socket, EventReader] = {}
        self._greeting: dict[socket.socket, bytes] = {}
        self._hello: dict[socket.socket, int] = {}  # hook connections whose hello is in
        self.trainers: dict[socket.socket, int] = {}  # of those, the training processes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closing = False  # the last reads: a viewer or a question is not served
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
        self._waker = WakePipe()  # the thread sleeps until a peer or this wakes it
        self._sel.register(self._waker, selectors.EVENT_READ)

    @property
    def open_connections(self) -> int:
        """Connections that may still bring a hook's events (its first bytes unread too)."""
        return len(self._readers) + len(self._greeting)

    def start(self) -> Server:
        self._thread = threading.Thread(target=self._loop, name="perftop-server", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=IDLE_S):
                sock = key.fileobj
                if sock is self._lsock:
                    self._accept()
                elif sock is self._waker:
                    self._waker.drain()
                else:
                    self._read(sock)  # type: ignore[arg-type]

    def _accept(self) -> bool:
        """Take one connection waiting; False where none is."""
        try:
            conn, _ = self._lsock.accept()
        except OSError:
            return False
        cred = peer_cred(conn)
        if cred is not None and cred[1] != os.geteuid():
            self.refused_peers += 1  # another user: the 0700 directory should have stopped it
            conn.close()
            return True
        if cred is not None:
            self.peer_pids.add(cred[0])
            self.job_pids.add(cred[0])
            self._pid_of[conn] = cred[0]
        conn.setblocking(False)
        self._greeting[conn] = b""
        self._sel.register(conn, selectors.EVENT_READ)
        self.connections += 1
        return True

    def _greet(self, conn: socket.socket, data: bytes) -> bytes | None:
        """Sort a new connection by its first 8 bytes; the bytes left for a hook's reader."""
        buf = self._greeting[conn] + data
        if len(buf) < len(MAGIC):
            self._greeting[conn] = buf
            return None
        del self._greeting[conn]
        kind = buf[: len(MAGIC)]
        pid = self._pid_of.pop(conn, None)
        if kind == MAGIC:
            self._readers[conn] = EventReader()
            return buf
        if self._closing:  # a viewer or a question as the server closes: none is served
            self._drop(conn)
            return None
        if pid is not None:  # a viewer or `perftop ls`: not one of the job's processes
            self.peer_pids.discard(pid)
            self.job_pids.discard(pid)
        self._unregister(conn)
        if kind == VIEW_MAGIC and self.on_viewer is not None:
            self.viewers += 1
            self.on_viewer(conn)
        elif kind == CTRL_MAGIC and self.on_control is not None:
            self.on_control(conn, buf[len(MAGIC) :])
        elif kind == INFO_MAGIC and self.info is not None:
            # on a thread of its own: the answer waits for a snapshot the hub takes now
            # (up to a second) and for a reader that may be slow, while the job's hooks
            # go on being read here
            threading.Thread(target=self._answer_info, args=(conn,), daemon=True).start()
        else:
            self.rejected_frames += 1
            self.closed_streams += 1
            conn.close()
        return None

    def _read(self, conn: socket.socket) -> bool:
        """Up to 256 KiB of what ``conn`` holds; False once nothing more is there now."""
        try:
            data = conn.recv(1 << 18)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return False
        if conn in self._greeting:
            rest = self._greet(conn, data)
            if rest is None:
                return conn in self._greeting  # (a greeting's first bytes: more may come)
            data = rest
        reader = self._readers[conn]
        try:
            decoded = reader.feed(data)
        except StreamError:
            self.closed_streams += 1
            self._drop(conn)
            return False
        finally:
            self.rejected_frames += reader.rejected
            reader.rejected = 0
        for frame, events in decoded:
            if conn not in self._hello:
                self._sort(conn, events)
            self.sink(frame, events)
        return True

    def _last_reads(self) -> None:
        """Once the serving thread has stopped: what hooks sent that it had not read (a
        connection not yet accepted or read when the job's end closed the server, on a
        loaded host), read to its end, not dropped with a process's last steps in it."""
        self._closing = True
        end = time.monotonic() + LAST_READS_S  # a peer that writes on and on is cut off
        while time.monotonic() < end and self._accept():
            pass
        for conn in [*self._greeting, *self._readers]:
            while time.monotonic() < end and self._read(conn):
                pass

    def settle(self, timeout: float = SETTLE_S) -> None:
        """Read the hellos of every hook connected (any thread): called when the job's top
        process has ended, so that a DataLoader worker forked just before (connected, its
        hello unread) is known as one and not taken for training that goes on."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hooks = [*list(self._readers), *list(self._greeting)]
            if all(c in self._hello for c in hooks):
                return
            time.sleep(0.02)

    def _answer_info(self, conn: socket.socket) -> None:
        try:
            conn.setblocking(True)
            conn.settimeout(2.0)
            if self.info is not None:
                conn.sendall(json.dumps(self.info()).encode() + b"\n")
        except (OSError, ValueError, TypeError):
            pass
        finally:
            conn.close()

    def _sort(self, conn: socket.socket, events: list[Event]) -> None:
        """A hook's hello says whether it is a training process or a DataLoader worker."""
        for ev in events:
            if isinstance(ev, Hello):
                self._hello[conn] = ev.pid
                if ev.worker_id is None:
                    self.trainers[conn] = ev.pid
                else:
                    self.job_pids.discard(ev.pid)
                return

    def send_to_trainers(self, data: bytes) -> list[int]:
        """Send ``data`` (whole frames) to every training process's hook, without waiting
        (any thread); the pids it went to. A hook that cannot take it now is left out."""
        sent = []
        for conn, pid in list(self.trainers.items()):
            try:
                if conn.send(data) == len(data):
                    sent.append(pid)
            except OSError:
                pass
        return sent

    def _unregister(self, conn: socket.socket) -> None:
        self._readers.pop(conn, None)
        self._hello.pop(conn, None)
        self.trainers.pop(conn, None)
        self._greeting.pop(conn, None)
        self._pid_of.pop(conn, None)
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass

    def _drop(self, conn: socket.socket) -> None:
        self._unregister(conn)
        conn.close()

    def pause(self) -> None:
        """Stop the serving thread, keeping the socket and every connection open (the
        monitor is about to fork itself into the background, see lifecycle.detach)."""
        self._stop.set()
        self._waker.wake()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._stop = threading.Event()
        self._waker.drain()

    def close(self) -> None:
        self._stop.set()
        self._waker.wake()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._thread is None or not self._thread.is_alive():
            try:
                self._last_reads()
            except Exception:  # the sink's failure: the reads end, the close goes on
                pass
        for conn in [*self._readers, *self._greeting]:
            self._drop(conn)
        self._sel.close()
        self._lsock.close()
        self._waker.close()
        try:
            self.path.unlink()
        except OSError:
            pass
