"""The sender's way to the monitor: what is buffered, sent in batches over the monitor's
socket (connected, greeted and written without waiting, or within a deadline), and the
monitor let in to read this process's stacks. A base of :class:`perftop.hook.sender.Sender`,
apart from its buffer and its threads: the socket's side of sending, whichever thread sends
(the state it reads is set in ``Sender._reset``).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from perftop.events import Dropped, Event
from perftop.hook import batch, ring
from perftop.peer import same_user
from perftop.wire import MAGIC, encode_frame

SEND_TIMEOUT_S = 2.0
PR_SET_PTRACER = 0x59616D61  # Yama (linux/prctl.h)
# A monitor that died must cost a send an error (EPIPE: dropped and counted), never the job
# its life: a job that set SIGPIPE back to its default (as scripts piped into `head` do) was
# killed by the hook's next send (exit 141). macOS has no such flag.
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
MAX_BATCH = 4096
EXIT_BATCH = 512  # smaller batches under a deadline: the last one overshoots it less


class Link:
    """Sends what a :class:`perftop.hook.sender.Sender` buffered; its attributes are the
    sender's."""

    path: str
    pid: int
    epoch_offset: float
    solo: bool
    closed: bool
    errors: int
    ring: Any
    steps: deque[tuple[Any, ...]]
    buf: deque[Any]
    recent: deque[tuple[int, float]]
    next_index: int
    dropped: int
    _dropped_sent: int
    _lock: threading.Lock
    _hello: Callable[[], Event]
    _sock: socket.socket | None
    _greeted: bool
    hello_sent: bool
    _next_connect: float
    _backoff: float
    _tail: bytes
    _tail_n: int

    def drain(self, deadline: float | None = None, nowait: bool = False) -> None:
        """Send what is buffered; on any failure the batch is dropped and counted. With a
        ``deadline`` (monotonic), nothing here waits past it, the lock included; with
        ``nowait`` (the training thread's send), nothing here waits at all."""
        if nowait:
            if not self._lock.acquire(blocking=False):
                return
        elif deadline is None:
            self._lock.acquire()
        elif not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return  # the sender thread is stuck in a send: what it holds is lost
        try:
            while self.pending() or self.dropped != self._dropped_sent:
                if deadline is None and self.closed:
                    break  # the exit's own flush takes over: no GIL taken from the exit
                if not self._send_batch(deadline, nowait):
                    break
                if deadline is not None and time.monotonic() > deadline:
                    break
        except Exception:
            self.errors += 1
        finally:
            self._lock.release()

    def pending(self) -> int:
        """Steps and events buffered, not sent yet."""
        return self.pending_steps() + len(self.buf)

    def pending_steps(self) -> int:
        """Steps buffered, not sent yet (the tracker's ring, or the deque without one)."""
        n = len(self.steps)
        return n + ring.buffered(self.ring) if self.ring is not None else n

    def _send_batch(self, deadline: float | None = None, nowait: bool = False) -> bool:
        timeout = _left(deadline)
        if timeout <= 0:
            return False
        if nowait and self._tail and not self._flush_tail():
            return False  # the steps wait in the bounded deque (it drops and counts)
        data, n = batch.encode(self, MAX_BATCH if deadline is None else EXIT_BATCH)
        sock = self._connect(None if nowait else timeout)
        if sock is None:
            self.dropped += n
            return False
        if self.dropped != self._dropped_sent:
            self._dropped_sent = self.dropped
            data.append(encode_frame([Dropped(time.time(), self.pid, self.dropped)]))
        return self._write(sock, b"".join(data), None if nowait else _left(deadline), n)

    def _flush_tail(self) -> bool:
        """Whether the monitor took the rest of the last batch (the training thread's
        send): nothing new is encoded before it has."""
        return self._sock is not None and self._write(self._sock, b"", None) and not self._tail

    def _write(self, sock: socket.socket, data: bytes, timeout: float | None, n: int = 0) -> bool:
        """Send what was left unsent, then ``data`` (``n`` items): all of it within
        ``timeout``, or with ``timeout`` None at once, keeping what the socket does not take
        as the tail (with the items of its batch). False (disconnected, the items counted
        as dropped) when the connection broke. An interrupt (KeyboardInterrupt) in a send
        leaves no half-known stream: the connection is dropped, the next one starts over."""
        if self._tail:
            data, self._tail = self._tail + data, b""
            n, self._tail_n = n + self._tail_n, 0
        try:
            if timeout is None:
                sock.settimeout(0.0)
                try:
                    sent = sock.send(data, _NOSIGNAL) if data else 0
                except (BlockingIOError, InterruptedError):
                    sent = 0
                self._tail = data[sent:]
                self._tail_n = n if self._tail else 0
            else:
                if timeout <= 0:
                    raise TimeoutError
                sock.settimeout(timeout)
                sock.sendall(data, _NOSIGNAL)
        except OSError:
            self.dropped += n
            self._disconnect()
            return False
        except BaseException:
            self.dropped += n
            self._disconnect()
            raise
        return True

    def probe(self) -> bool:
        """Whether a monitor listens on the socket, asked without waiting (a non-blocking
        connect: a missing or dead socket fails at once). The connection is kept; it says
        hello with the first batch. Lets the monitor read this process's stacks."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.setblocking(False)
            s.connect(self.path)
        except BlockingIOError:  # a monitor whose backlog is full: there, but busy
            s.close()
            return True
        except OSError:
            s.close()
            return False
        if not same_user(s):  # a socket planted by another user: no monitor of ours
            s.close()
            return False
        if self._sock is None:
            self._sock, self._greeted = s, False
            allow_ptrace(s)
        else:
            s.close()
        return True

    def _connect(self, timeout: float | None = SEND_TIMEOUT_S) -> socket.socket | None:
        """The connection, made (and greeted) if needed; ``timeout`` None: without waiting."""
        s = self._sock
        now = time.monotonic()
        if s is None:
            if now < self._next_connect:
                return None
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(0.0 if timeout is None else timeout)
                s.connect(self.path)
                if not same_user(s):  # another user's socket: send it nothing, obey nothing
                    raise OSError("the socket is another user's")
            except OSError:
                s.close()
                self._next_connect = now + self._backoff
                self._backoff = min(self._backoff * 2, 5.0)
                return None
            self._sock, self._greeted = s, False
            allow_ptrace(s)
        if not self._greeted:
            if not self._write(s, MAGIC + encode_frame([self._hello()]), timeout):
                return None
            self._greeted = self.hello_sent = True
            self._backoff = 0.5
        return s

    def _disconnect(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None
            # the rest of a frame of that connection (the next starts over): its batch is lost
            self.dropped += self._tail_n
            self._tail, self._tail_n = b"", 0
            self._next_connect = time.monotonic() + self._backoff


def _left(deadline: float | None) -> float:
    """Seconds a socket call may take: SEND_TIMEOUT_S, or less to meet ``deadline``."""
    if deadline is None:
        return SEND_TIMEOUT_S
    return min(SEND_TIMEOUT_S, deadline - time.monotonic())


def allow_ptrace(sock: socket.socket) -> None:
    """Let the monitor at the other end of ``sock`` (and py-spy, its child) read this
    process's stacks under Yama's ``ptrace_scope=1``: ``prctl(PR_SET_PTRACER, pid)``.
    Linux only; where it cannot work (no Yama, scope 2 or 3, a container without
    SYS_PTRACE) it does nothing."""
    if not sys.platform.startswith("linux") or os.environ.get("PERFTOP_NO_PTRACER"):
        return
    try:
        import ctypes
        import struct

        cred = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        monitor = struct.unpack("3i", cred)[0]
        if monitor > 0 and monitor != os.getpid():
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PTRACER, ctypes.c_ulong(monitor), 0, 0, 0)
    except Exception:
        pass
