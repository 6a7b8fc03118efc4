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

from perftop.events import Event, HookClose, Note
from perftop.hook import batch, ring
from perftop.hook.inbox import Inbox
from perftop.hook.sender_link import Link
from perftop.hook.solo import INF, single_threaded_flag

CAPACITY = 65536
INTERVAL_S = 0.25  # the most the sender delays an event (the TUI redraws every 0.5 s)
# The first sends come sooner: after FIRST_S, then twice as long each time up to
# ``interval``, where the training thread sends (solo.py) and where the sender's thread does
# (it slept ``interval`` first: a hogwild trainer of 0.2 s sent nothing before its exit,
# whose 0.1 s then held its whole stream). Steps buffered when the thread blocks are not
# sent until it runs again, so with a first send only after 0.25 s a job that hung in its
# first quarter second of steps had sent none: the monitor, which needs a few steps' median
# to call one stalled, never saw the hang (four sends more per process, at its start).
FIRST_S = 0.02
# ... and stay FIRST_S apart until this many steps went out: the monitor calls a step stalled
# only against the median of five before it (monitor/stall.py), and a job's first steps are
# its slowest (the first send took the first step alone, and the next, 40 ms later, came
# after a hang in step 10 began: no stall seen).
FIRST_STEPS = 8
EARLY_SENDS = 24  # ... or until this many sends went out (a thread wakes with no steps too)
EXIT_S = 0.1  # the most a process's exit (or a DataLoader worker's) waits for perftop
# Of EXIT_S, what the sends leave for the rest: the last batch's overshoot, the disconnect,
# and freeing a full buffer (65,536 steps take ~4 ms to free).
EXIT_RESERVE_S = 0.02


# The system clock moved this far against perf_counter since the offset was read: it was
# set (a VM's clock after a pause or a migration, NTP's first sync, ``date -s``), and the
# stamps follow it (a read's own error is under a microsecond; a slew moves both clocks).
CLOCK_STEP_S = 0.0005


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


class Sender(Link):
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
        # perf_counter() -> epoch seconds; the hot path stores perf_counter stamps. Read
        # again at each send (retime), the ring's tracker told where the clock was set.
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
        self._gap = FIRST_S  # the time to the next send after this one (FIRST_S)
        self._early = 0  # the steps sent so far (not events), up to FIRST_STEPS
        self._sends = 0  # the sends so far, up to EARLY_SENDS
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
            self._due(time.perf_counter() + min(self._gap, self.interval))
            return
        self._start_thread()

    def pin_solo(self) -> None:
        """From now on this process's own thread sends, at its puts, and no thread of ours
        runs here (one already started ends at its next wake). For a DataLoader worker:
        its few reports a second are its only events, put where it is anyway, while a
        sender thread would wake 4x/s in each of the job's workers (~0.1 ms of CPU a
        wake, taken from the batches)."""
        self.pinned = self.solo = self.started = True
        self._gap = self.interval
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
            self._due(time.perf_counter() + self._next_gap())
            self.retime()
            self.drain(nowait=True)
            self._poll()
        except Exception:
            self.errors += 1
        finally:
            self._pumping = False

    def _next_gap(self) -> float:
        """Before a send: the time to the next one (FIRST_S apart until FIRST_STEPS steps
        or EARLY_SENDS sends went out, then twice as long each time up to ``interval``)."""
        if self._early < FIRST_STEPS and self._sends < EARLY_SENDS:
            self._sends += 1
            self._early += self.pending_steps()
        else:
            self._gap = min(self.interval, 2 * self._gap)
        return self._gap

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
        gap = min(self._gap, self.interval)
        while not self.closed and not self.pinned:
            time.sleep(gap)
            if self.on_tick is not None:
                try:
                    self.on_tick()
                except Exception:
                    self.errors += 1
            self.retime()
            gap = self._next_gap()
            self.drain()
            self._poll()

    def retime(self) -> None:
        """The system clock read against perf_counter again, once a send (1.4 µs): where it
        was set since (a VM's clock stepped after a pause or a migration), the stamps made
        from now on carry its new time, as the job's own ``time.time()``, c10d's records
        and perftop's probes do; left at the start's offset, every step and pass after a
        60 ms step read 60 ms before the loop's own timing of it. Steps still in the
        buffer then were stamped before (at most a send's interval of them)."""
        try:
            off = epoch_offset()
            if abs(off - self.epoch_offset) > CLOCK_STEP_S:
                self.epoch_offset = off
                if self.ring is not None:
                    self.ring.ring_off = off  # the tracker stamps its ring's steps with it
        except Exception:
            self.errors += 1

    def _poll(self) -> None:
        """The monitor's requests (the inbox), then each poller's own work, after a drain."""
        if self.inbox is not None:
            self.inbox.poll(self)
        for poll in self.pollers:
            try:
                poll()
            except Exception:
                self.errors += 1

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


def debug(msg: str) -> None:
    """Internal diagnostics, only with PERFTOP_DEBUG=1 (the hook is otherwise silent)."""
    if os.environ.get("PERFTOP_DEBUG"):
        print(f"perftop[{os.getpid()}]: {msg}", file=sys.stderr)
