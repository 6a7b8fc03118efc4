"""The hook's background sender: a bounded buffer drained by a daemon thread.

The training thread only appends to a deque: steps to a bounded one through its C-level
``append`` (no Python frame; when it is full the oldest steps fall out, and the sender
counts them from the gaps in step indices), other events through :meth:`Sender.put`,
which counts a drop when its buffer is full. A daemon
thread wakes every ``interval`` seconds (0.25: the most an event waits; the TUI redraws
every 0.5 s), encodes what is there into one frame and writes it to the monitor's Unix
socket. Each wake costs the training thread a GIL hand-off and the sender's cold code (about
0.1 ms of CPU on a busy machine), so it batches by time, never per event, and sleeps plainly
(an ``Event.wait`` takes the GIL more often and runs more Python per wake). If the monitor is slow, gone or was never there, events are
dropped and counted; the training never waits. After a fork the child starts empty and
silent, so DataLoader workers never send their parent's events twice.

:meth:`Sender.probe` asks, without waiting, whether a monitor listens on the socket: the
hook arms only when one answers. :meth:`Sender.close` runs at exit and in DataLoader
workers' finalizers under one wall-clock deadline (``EXIT_S``): it never waits for a lock
the sender thread holds through a slow ``sendall``, and every socket call it makes is
bounded by what is left of the deadline.
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

from perftop.events import Dropped, Event, Note
from perftop.hook.inbox import Inbox
from perftop.wire import (
    MAGIC,
    REC_BWD,
    REC_DATA,
    REC_INDEX,
    REC_OPT,
    REC_PHASES,
    REC_SOURCE,
    REC_T0,
    REC_T1,
    STEP_RECORD,
    STEP_SOURCES,
    encode_frame,
    encode_steps_frame,
)

CAPACITY = 65536
INTERVAL_S = 0.25  # the most the sender delays an event (the TUI redraws every 0.5 s)
SEND_TIMEOUT_S = 2.0
EXIT_S = 0.1  # the most a process's exit (or a DataLoader worker's) waits for perftop
# Of EXIT_S, what the sends leave for the rest: the last batch's overshoot, the disconnect,
# and freeing a full buffer (65,536 steps take ~4 ms to free).
EXIT_RESERVE_S = 0.02
PR_SET_PTRACER = 0x59616D61  # Yama (linux/prctl.h)
MAX_BATCH = 4096
EXIT_BATCH = 512  # smaller batches under a deadline: the last one overshoots it less
_SOURCE_CODE = {name: i for i, name in enumerate(STEP_SOURCES)}


class Sender:
    """Ships events to one socket path; ``put`` is the only call on the training thread."""

    def __init__(
        self,
        path: str,
        hello: Callable[[], Event],
        *,
        on_event: Callable[[Event], None] | None = None,
        capacity: int = CAPACITY,
        interval: float = INTERVAL_S,
    ) -> None:
        self.path = path
        self._hello = hello
        # What the monitor sends back on the same connection (a capture's ask), read
        # without waiting on the sender's wakes (inbox.py).
        self.inbox = Inbox(on_event) if on_event is not None else None
        self.capacity = capacity
        self.interval = interval
        # perf_counter() -> epoch seconds; the hot path stores perf_counter stamps.
        self.epoch_offset = time.time() - time.perf_counter()
        self.steps: deque[tuple[Any, ...]] = deque(maxlen=capacity)
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self.pid = os.getpid()
        self.steps.clear()  # cleared in place: the step tracker holds its append
        self._next_index = 0
        self.buf: deque[Any] = deque()
        self.dropped = 0
        self._dropped_sent = 0
        self._sock: socket.socket | None = None
        self._greeted = False  # the probe's connection says hello with its first batch
        self._next_connect = 0.0
        self._backoff = 0.5
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.errors = 0
        self.started = False
        self.closed = False

    # -- training thread -------------------------------------------------------------
    def put(self, item: Any) -> None:
        """Queue an event (or a raw step tuple). Never blocks, never raises."""
        if len(self.buf) < self.capacity:
            self.buf.append(item)
        else:
            self.dropped += 1
        if not self.started:
            self.start()

    def start(self) -> None:
        """Start the sender thread once (on the first event or the first step)."""
        if self.started:
            return
        self.started = True
        try:
            t = threading.Thread(target=self._run, name="perftop-sender", daemon=True)
            t.start()
            self._thread = t
        except Exception:  # interpreter shutting down, thread limit: stay silent
            self.errors += 1

    # -- sender thread ---------------------------------------------------------------
    def _run(self) -> None:
        # Nothing wakes it early: close() flushes on its own thread, and the daemon thread
        # finds ``closed`` at its next wake.
        while not self.closed:
            time.sleep(self.interval)
            self.drain()
            if self.inbox is not None:
                self.inbox.poll(self)

    def drain(self, deadline: float | None = None) -> None:
        """Send what is buffered; on any failure the batch is dropped and counted. With a
        ``deadline`` (monotonic), nothing here waits past it, the lock included."""
        if deadline is None:
            self._lock.acquire()
        elif not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return  # the sender thread is stuck in a send: what it holds is lost
        try:
            while self.steps or self.buf or self.dropped != self._dropped_sent:
                if deadline is None and self.closed:
                    break  # the exit's own flush takes over: no GIL taken from the exit
                if not self._send_batch(deadline):
                    break
                if deadline is not None and time.monotonic() > deadline:
                    break
        except Exception:
            self.errors += 1
        finally:
            self._lock.release()

    def _send_batch(self, deadline: float | None = None) -> bool:
        timeout = _left(deadline)
        if timeout <= 0:
            return False
        data, n = self._encode_batch(MAX_BATCH if deadline is None else EXIT_BATCH)
        sock = self._connect(timeout)
        if sock is None:
            self.dropped += n
            return False
        if self.dropped != self._dropped_sent:
            self._dropped_sent = self.dropped
            data.append(encode_frame([Dropped(time.time(), self.pid, self.dropped)]))
        try:
            timeout = _left(deadline)
            if timeout <= 0:
                raise TimeoutError
            sock.settimeout(timeout)
            sock.sendall(b"".join(data))
        except OSError:
            self._disconnect()
            self.dropped += n
            return False
        return True

    def _encode_batch(self, limit: int = MAX_BATCH) -> tuple[list[bytes], int]:
        """Up to ``limit`` buffered items as frames, in order: runs of plain steps packed
        as binary records, everything else as JSON. Steps come first."""
        frames: list[bytes] = []
        pid, off, pack = self.pid, self.epoch_offset, STEP_RECORD.pack
        packed: list[bytes] = []
        other: list[Any] = []
        n = 0
        closing = limit == MAX_BATCH  # the thread's batch, not the exit's own
        for queue in (self.steps, self.buf):
            while queue and n < limit:
                if closing and self.closed:
                    break  # the exit took over: the thread must not hold the GIL from it
                item = queue.popleft()
                n += 1
                if not isinstance(item, tuple):
                    if packed:
                        frames.append(encode_steps_frame(packed))
                        packed = []
                    other.append(item.encode())
                    continue
                # a step record (wire.REC_*)
                if item[REC_INDEX] > self._next_index:  # the bounded deque let steps fall out
                    self.dropped += item[REC_INDEX] - self._next_index
                self._next_index = item[REC_INDEX] + 1
                if item[REC_PHASES] is None:
                    if other:
                        frames.append(encode_frame(other))
                        other = []
                    packed.append(
                        pack(
                            pid,
                            item[REC_INDEX],
                            item[REC_T0] + off,
                            item[REC_T1] + off,
                            item[REC_DATA],
                            item[REC_BWD],
                            item[REC_OPT],
                            _SOURCE_CODE.get(item[REC_SOURCE], 0),
                        )
                    )
                else:
                    if packed:
                        frames.append(encode_steps_frame(packed))
                        packed = []
                    index, t0, t1 = item[REC_INDEX], item[REC_T0] + off, item[REC_T1] + off
                    other.append(["step", pid, index, t0, t1, *item[REC_DATA:]])
        if packed:
            frames.append(encode_steps_frame(packed))
        if other:
            frames.append(encode_frame(other))
        return frames, n

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
        if self._sock is None:
            self._sock, self._greeted = s, False
            allow_ptrace(s)
        else:
            s.close()
        return True

    def _connect(self, timeout: float = SEND_TIMEOUT_S) -> socket.socket | None:
        s = self._sock
        now = time.monotonic()
        if s is None:
            if now < self._next_connect:
                return None
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(timeout)
                s.connect(self.path)
            except OSError:
                s.close()
                self._next_connect = now + self._backoff
                self._backoff = min(self._backoff * 2, 5.0)
                return None
            self._sock, self._greeted = s, False
            allow_ptrace(s)
        if not self._greeted:
            try:
                s.settimeout(timeout)
                s.sendall(MAGIC + encode_frame([self._hello()]))
            except OSError:
                self._disconnect()
                return None
            self._greeted = True
            self._backoff = 0.5
        return s

    def _disconnect(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None
            self._next_connect = time.monotonic() + self._backoff

    # -- shutdown ----------------------------------------------------------------------
    def note(self, level: str, text: str) -> None:
        self.put(Note(time.time(), level, f"hook:{self.pid}", text))

    def close(self, timeout: float = EXIT_S) -> None:
        """Final flush at interpreter exit (or a worker's), all of it within ``timeout``
        seconds of wall clock: lock, connect, hello and send included."""
        if self.closed or self.pid != os.getpid():
            return
        self.closed = True
        if self.started:
            self.drain(deadline=time.monotonic() + max(0.0, timeout - EXIT_RESERVE_S))
        if self._lock.acquire(blocking=False):  # else the sender thread still uses it
            try:
                self._disconnect()
            finally:
                self._lock.release()
        self.steps.clear()  # what did not make it is dropped: nothing left to free at exit
        self.buf.clear()


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


def debug(msg: str) -> None:
    """Internal diagnostics, only with PERFTOP_DEBUG=1 (the hook is otherwise silent)."""
    if os.environ.get("PERFTOP_DEBUG"):
        print(f"perftop[{os.getpid()}]: {msg}", file=sys.stderr)
