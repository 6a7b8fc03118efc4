"""The hook's background sender: a bounded buffer drained by a daemon thread.

The training thread only writes steps into the step tracker's ring (``ring.py``: the wire's
record of each step, no object kept; when it is full new steps are dropped, and the sender
counts them from the gaps in step indices) and appends other events to a deque through
:meth:`Sender.put`, which counts a drop when its buffer is full. A daemon
thread wakes every ``interval`` seconds (0.25: the most an event waits; the TUI redraws
every 0.5 s), encodes what is there into one frame and writes it to the monitor's Unix
socket. Each wake costs the training thread a GIL hand-off and the sender's cold code (about
0.1 ms of CPU on a busy machine), so it batches by time, never per event, and sleeps plainly
(an ``Event.wait`` takes the GIL more often and runs more Python per wake). If the monitor is slow, gone or was never there, events are
dropped and counted; the training never waits. After a fork the child starts empty and
silent, so DataLoader workers never send their parent's events twice.

In a process with no other thread the training thread sends instead, without waiting, and
no thread is started until the process has another one (``solo.py`` says why: a thread
costs a single-threaded job atomics in every mutex and malloc). A DataLoader worker always
sends from its own thread (:meth:`Sender.pin_solo`): its reports are its only events.

:meth:`Sender.probe` asks, without waiting, whether a monitor listens on the socket: the
hook arms only when one answers. A socket whose listener runs as another user (a name
planted by a neighbour) is no monitor: the hook neither sends to it nor reads from it
(``perftop.peer``). :meth:`Sender.close` runs at exit and in DataLoader
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

from perftop.events import Dropped, Event, HookClose, Note
from perftop.hook import batch, ring
from perftop.hook.inbox import Inbox
from perftop.hook.solo import INF, single_threaded_flag
from perftop.peer import same_user
from perftop.wire import MAGIC, encode_frame

CAPACITY = 65536
INTERVAL_S = 0.25  # the most the sender delays an event (the TUI redraws every 0.5 s)
SEND_TIMEOUT_S = 2.0
EXIT_S = 0.1  # the most a process's exit (or a DataLoader worker's) waits for perftop
# Of EXIT_S, what the sends leave for the rest: the last batch's overshoot, the disconnect,
# and freeing a full buffer (65,536 steps take ~4 ms to free).
EXIT_RESERVE_S = 0.02
PR_SET_PTRACER = 0x59616D61  # Yama (linux/prctl.h)
# A monitor that died must cost a send an error (EPIPE: dropped and counted), never the job
# its life: a job that set SIGPIPE back to its default (as scripts piped into `head` do) was
# killed by the hook's next send (exit 141). macOS has no such flag.
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
MAX_BATCH = 4096
EXIT_BATCH = 512  # smaller batches under a deadline: the last one overshoots it less


def epoch_offset(tries: int = 5) -> float:
    """``time.time() - time.perf_counter()``, from the read whose two perf_counter reads
    around the system clock's lie closest: a preemption between a lone pair of reads (ms
    on a loaded machine) would shift every stamp made from it, and place c10d's
    system-clock records in the wrong phase of the steps."""
    perf, wall = time.perf_counter, time.time
    best, gap = 0.0, float("inf")
    for _ in range(tries):
        a = perf()
        w = wall()
        b = perf()
        if b - a < gap:
            best, gap = w - (a + b) / 2, b - a
    return best


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
        self.epoch_offset = epoch_offset()
        self.steps: deque[tuple[Any, ...]] = deque(maxlen=capacity)  # a tracker's without a ring
        # The step tracker whose ring holds the steps (ring.py), where HookState gives one.
        self.ring: Any = None
        self.single = single_threaded_flag()  # None: always a thread (solo.py)
        # Told the perf_counter time of the next send on the training thread (INF: none),
        # which the step tracker compares each step's end with (HookState wires it).
        self.on_due: Callable[[float], None] | None = None
        self.on_tick: Callable[[], None] | None = None  # the sender thread's, each interval
        # Called on each wake of the sender's thread, never on the training thread
        # (collectives.py reads c10d's flight recorder there).
        self.pollers: list[Callable[[], None]] = []
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        # A fork's child holds its parent's connection: closed here (the parent's stays
        # open), not dropped, whose ResourceWarning reached a job run with -W error or
        # -X dev as a traceback in every DataLoader worker.
        inherited = getattr(self, "_sock", None)
        if inherited is not None:
            try:
                inherited.close()
            except OSError:
                pass
        self.pid = os.getpid()
        self.steps.clear()  # cleared in place: the step tracker holds its append
        self.recent: deque[tuple[int, float]] = deque(maxlen=batch.RECENT_STEPS)
        self.next_index = 0
        self.buf: deque[Any] = deque()
        self.dropped = 0
        self._dropped_sent = 0
        self._sock: socket.socket | None = None
        self._greeted = False  # the probe's connection says hello with its first batch
        self.hello_sent = False  # on any connection: the monitor knows this process
        self._next_connect = 0.0
        self._backoff = 0.5
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.errors = 0
        self.started = False
        self.closed = False
        self.solo = False  # the training thread sends (no other thread in the process)
        self.pinned = False  # solo for good, whatever threads the process has (pin_solo)
        self._due(INF)  # solo: when the training thread sends next (perf_counter)
        self._tail = b""  # what a non-blocking send left unsent, sent first next time
        self._tail_n = 0  # the items of the batch whose frame the tail ends
        self._pumping = False

    # -- training thread -------------------------------------------------------------
    def put(self, item: Any, urgent: bool = False) -> None:
        """Queue an event (or a raw step tuple). Never blocks, never raises. ``urgent``:
        where the training thread sends (solo), send it now, not at the next due time (an
        interval's start: a long evaluation must not hold it back)."""
        if len(self.buf) < self.capacity:
            self.buf.append(item)
        else:
            self.dropped += 1
        if not self.started:
            self.start()
        elif self.solo and (urgent or time.perf_counter() >= self.flush_at):
            self.pump()

    def start(self) -> None:
        """Start sending once (on the first event or the first step): from the training
        thread while the process has no other thread, else from the sender's thread."""
        if self.started:
            return
        self.started = True
        if self.single is not None and self.single():
            self.solo = True
            self._due(time.perf_counter() + self.interval)
            return
        self._start_thread()

    def pin_solo(self) -> None:
        """From now on this process's own thread sends, at its puts, and no thread of ours
        runs here (one already started ends at its next wake). For a DataLoader worker:
        its few reports a second are its only events, put where it is anyway, while a
        sender thread would wake 4x/s in each of the job's workers (~0.1 ms of CPU a
        wake, taken from the batches)."""
        self.pinned = self.solo = self.started = True
        self._due(time.perf_counter() + self.interval)

    def _due(self, t: float) -> None:
        self.flush_at = t
        if self.on_due is not None:
            self.on_due(t)

    def pump(self) -> None:
        """The training thread's send (solo): what is buffered, without waiting, then the
        monitor's frames. Once the process has another thread, the sender's thread takes
        over. Never raises an error of perftop's (an interrupt passes on)."""
        if self._pumping or not self.solo:
            return
        self._pumping = True
        try:
            if not self.pinned and (self.single is None or not self.single()):
                self.solo = False
                self._due(INF)
                self._start_thread()
                return
            self._due(time.perf_counter() + self.interval)
            self.drain(nowait=True)
            if self.inbox is not None:
                self.inbox.poll(self)
            for poll in self.pollers:
                try:
                    poll()
                except Exception:
                    self.errors += 1
        except Exception:
            self.errors += 1
        finally:
            self._pumping = False

    def _start_thread(self) -> None:
        if self._thread is not None:  # a put() on a new thread and the pump, at once
            return
        try:
            t = self._thread = threading.Thread(
                target=self._run, name="perftop-sender", daemon=True
            )
            t.start()
        except Exception:  # interpreter shutting down, thread limit: stay silent
            self.errors += 1

    # -- sender thread ---------------------------------------------------------------
    def _run(self) -> None:
        # Nothing wakes it early: close() flushes on its own thread, and the daemon thread
        # finds ``closed`` at its next wake.
        while not self.closed and not self.pinned:
            time.sleep(self.interval)
            if self.on_tick is not None:
                try:
                    self.on_tick()
                except Exception:
                    self.errors += 1
            self.drain()
            if self.inbox is not None:
                self.inbox.poll(self)
            for poll in self.pollers:
                try:
                    poll()
                except Exception:
                    self.errors += 1

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
        n = len(self.steps) + len(self.buf)
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

    # -- shutdown ----------------------------------------------------------------------
    def note(self, level: str, text: str) -> None:
        self.put(Note(time.time(), level, f"hook:{self.pid}", text), urgent=True)

    def close(self, timeout: float = EXIT_S) -> None:
        """Final flush at interpreter exit (or a worker's), all of it within ``timeout``
        seconds of wall clock: lock, connect, hello and send included."""
        if self.closed or self.pid != os.getpid():
            return
        self.closed = True
        bye = HookClose(time.time(), self.pid)
        if self.started and (self.hello_sent or self.pending()):
            # Last, after every step; only from a process the monitor hears from (a
            # launcher that never sent anything stays unknown to it).
            self.buf.append(bye)
            self.drain(deadline=time.monotonic() + max(0.0, timeout - EXIT_RESERVE_S))
        if self._lock.acquire(blocking=False):  # else the sender thread still uses it
            try:
                self._disconnect()
            finally:
                self._lock.release()
        # What did not make it is dropped (counted, though no one can be told any more):
        # nothing left to free at exit.
        self.dropped += len(self.steps) + sum(1 for e in self.buf if e is not bye)
        if self.ring is not None:
            self.dropped += ring.discard(self.ring)
        self.steps.clear()
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
