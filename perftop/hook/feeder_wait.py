"""The arithmetic of the wait behind a feeder (first_forward.py): how long the training
thread was off the CPU before a step's forward, the rule that stops reading the CPU clock
while no step waits (``WAIT_SEEN``), what a feeder's next batch typically takes, and the note
said once a step booked such a wait. A base of :class:`perftop.hook.first_forward.FirstForward`
apart from the arming and firing of its one-shot hook: the few numbers a step's wait is.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from perftop.hook import gap_forward
from perftop.hook.pass_meter import COUNTS_SWITCHES, cpu_wall, switches
from perftop.hook.state import HookState
from perftop.hook.steps import OPTIMIZER
from perftop.wire import DATA_WAIT_NOTE

RECENT = 8  # a feeder's wait after a pass: at most the median of this many steps' waits
# The CPU clock is a system call: ~0.6 µs in a loop of its own, but ~4 µs added to a tight
# training step on a VM (its two reads a step were a quarter of what the hook cost a 120 µs
# step). Once FAST_AFTER steps in a row waited less than WAIT_SEEN before their forward,
# it is no longer read: the loop's own work there (zero_grad(), its lines) took at most
# ``cpu_hi`` of CPU, so a step whose time before its forward stays within ``cpu_hi`` +
# WAIT_SEEN is booked no wait (at most WAIT_SEEN left out), and a longer one is booked its
# time beyond ``cpu_hi`` (a feeder's empty queue; a garbage collection there counts once as
# waiting) and the clock is read again from the next step on.
WAIT_SEEN, FAST_AFTER = 10e-6, 16
# Time off the CPU with no voluntary context switch in it was a wait for a core, not for
# data: a busy host preempted the thread (or the time was CPU work beyond ``cpu_hi``). The
# count of the thread's voluntary switches (it blocked: on a queue, a lock, the GIL, a read,
# a sleep) is getrusage()'s, the GIL kept; its CPU time is not the clock's (it lags by the
# slice not yet accounted, up to a tick). While the CPU clock is left unread, the count is
# read every MARK_EVERY step ends, and a wait is checked against the last count read at or
# before its arm.
MARK_EVERY = 8

_perf = time.perf_counter
_cpu = time.thread_time  # this thread's CPU time: a clock read, the GIL kept


class FeederWait:
    """Times a step's wait before its forward; its attributes are set in
    ``FirstForward.__init__``."""

    state: HookState
    tracker: Any
    t0: float
    c0: float
    timed: bool
    noted: bool
    note_due: int
    fast: bool
    short: int
    cpu_hi: float
    recent: list[float]
    recent_i: int
    recent_n: int
    recent_at: int
    blocks: int  # the thread's voluntary switches when last read (-1: not read)
    unread: int  # step ends since the count was last read while the clock is left unread

    def start(self) -> None:
        """The wait starts (at the arm): its wall time; where it is timed, the thread's
        count of voluntary switches and its CPU time, not read while no step waits (the
        clock: -1; WAIT_SEEN), the count then every MARK_EVERY step ends."""
        if self.timed and COUNTS_SWITCHES:  # the count before the wait's start
            self.unread += 1
            if not self.fast or self.unread >= MARK_EVERY:
                self.blocks, self.unread = switches(), 0
        if self.timed and not self.fast:
            self.c0, self.t0 = cpu_wall()  # a wait for a core the read ends is the step's
        else:
            self.t0, self.c0 = _perf(), -1.0

    def ran(self) -> bool:
        """The thread never blocked since the count was read (at or before the arm): its
        time off the CPU since then was a wait for a core only."""
        return self.blocks >= 0 and switches() == self.blocks  # (read: counted)

    def closure_began(self) -> None:
        """``opt.step(closure)`` began (its pre-hook): the closures' forwards come inside
        it, so the step's wait is the time off the CPU before it, taken here. (Taken at the
        first closure's forward and capped by the wall time before the step, a closure's
        own time off the CPU, a sleep, filled that cap wherever the loop ran on the CPU
        between steps: a log line, a garbage collection, a core it waited for.)"""
        try:
            tr = self.tracker
            if self.timed and threading.get_ident() == tr.thread:
                self.timed = False
                t = _perf()
                self.timed_wait(tr, t, _cpu() if self.c0 >= 0.0 else -1.0)
        except Exception:
            self.state.internal_error("forward pre-hook")

    def typical(self) -> float:
        """What a feeder's next batch takes: the median of the last :data:`RECENT` steps'
        waits before their forwards (each step's summed, :meth:`remember`; 0 before any).
        Not their longest: on a busy host one of them stretched by a preemption (or a wait
        for the GIL) lets the time off the CPU at a pass's end, its own, go to the wait, and
        the pass reads that much shorter."""
        n = min(self.recent_n, RECENT)
        return sorted(self.recent[:n])[n // 2] if n else 0.0

    def remember(self, index: int, wait: float) -> None:
        """A step's wait among the recent ones: a step that times more than one forward
        (two losses, each with its backward and its optimizer's step: the second's forward
        comes right after the step's end and waits for nothing) is one entry, their sum. As
        one entry each, the zeros were half the ring, and one more (a pass, whose own wait
        is not an entry) made the median 0: every other step after a pass booked no wait."""
        if index == self.recent_at:  # (-1 before any entry)
            self.recent[(self.recent_i - 1) % RECENT] += wait
            return
        self.recent_at = index
        self.recent[self.recent_i] = wait
        self.recent_i = (self.recent_i + 1) % RECENT
        self.recent_n += 1

    def timed_wait(self, tr: Any, t: float, c: float) -> None:
        """The wait up to ``t``, the forward's (or the closure step's) start; ``c``: the
        thread's CPU clock read with it (-1 where the clock is left unread)."""
        gap = t - self.t0
        if tr.in_gap and tr.grad() and gap_forward.saves_done(tr, t):
            # The step's forward after a checkpoint's saves: the checkpoint ended where its
            # last save returned (its file's writing is time off the CPU too, and its own);
            # the wait after that is this step's. Not a step like the others: the rule of
            # steps that wait for nothing (WAIT_SEEN) learns nothing from it.
            after = max(0.0, t - tr.save_end)
            if self.c0 < 0.0:
                wait = max(0.0, after - self.cpu_hi)
            else:
                wait = min(after, max(0.0, gap - (c - self.c0)))
        elif self.c0 < 0.0:  # the clock was not read: no step has been waiting
            wait = max(0.0, gap - self.cpu_hi)
            if wait < WAIT_SEEN or self.ran():
                wait = 0.0
            else:  # this one did: the clock is read again from the next step
                self.fast, self.short = False, 0
        else:
            cpu = c - self.c0
            wait = max(0.0, gap - cpu)
            if wait >= WAIT_SEEN and self.ran():
                wait = 0.0
            if wait < WAIT_SEEN:
                self.cpu_hi = max(self.cpu_hi, cpu) if self.short else cpu
                self.short += 1
                self.fast = self.short >= FAST_AFTER
            else:
                self.short = 0
        if tr.in_opt is not None:
            # Inside ``opt.step(closure)`` (LBFGS): the time since the optimizer step began
            # is that step's, so the wait is at most what came before it (taken where it
            # began, closure_began; none when armed inside it, after a closure's backward).
            wait = min(wait, max(0.0, tr.opt_t0 - self.t0))
        tr.first_forward(wait)
        if tr.grad():  # a step's forward (a pass's first one waits for no batch)
            self.remember(tr.index, wait)
        # Said once a step booked this wait: its forward came with no fetch before it,
        # and it ended with none after it (data_note). A step after one that made none (a
        # prefetching wrapper's epoch end) that fetches, before or after a forward, is the
        # loader's.
        if (
            not self.noted
            and self.note_due < 0
            and tr.fwd_wait >= 0.0
            and not (tr.has_fetch or tr.pend)
        ):
            self.note_due = tr.index  # said once that step ends with no fetch (arm)

    def data_note(self, tr: Any) -> None:
        """Past the step that timed a wait before its forward: the note, unless that step
        fetched after all. Where a step end arms (an optimizer's loop), the closing
        step's fetch is still known here (its index just moved on); elsewhere it is not,
        and the note is said."""
        due, self.note_due = self.note_due, -1
        if tr.mode >= OPTIMIZER and tr.index == due + 1 and tr.has_fetch:
            return
        if not self.noted:
            self.noted = True
            self.state.sender.note("info", DATA_WAIT_NOTE)
