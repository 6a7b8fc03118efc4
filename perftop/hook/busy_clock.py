"""The training thread's busy time: what a wait measured off the CPU must leave out.

Wall time less this thread's CPU time is its time off the CPU, but a thread preempted on a
busy machine is off the CPU too, without waiting for anything of its own. Linux counts that
apart: the second field of ``/proc/thread-self/schedstat`` is the thread's run-queue delay
(runnable, waiting for a core), complete for every past wait once the thread runs again.
So busy = CPU time (``thread_time``, exact to the call) + run-queue delay, and wall time
less busy time is time blocked: on a queue, a lock or the GIL, a read, a sleep. Where the
file is missing (no schedstats), busy is the CPU time alone.

The file is opened on the thread it measures (``thread-self`` binds the descriptor to it),
again on another thread, and forgotten in a forked child (it would read the parent's).
"""

from __future__ import annotations

import os
import threading
import time

_cpu = time.thread_time
_ident = threading.get_ident


class BusyClock:
    def __init__(self) -> None:
        self.fd = -1
        self.tid = 0
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def __call__(self) -> float:
        """Busy seconds of the calling thread (comparable between calls on one thread)."""
        c = _cpu()
        if _ident() != self.tid:
            self._open()
        if self.fd < 0:
            return c
        try:
            return c + int(os.pread(self.fd, 64, 0).split()[1]) * 1e-9
        except (OSError, ValueError, IndexError):
            self._close()  # CPU time alone on this thread from now on
            return c

    def _open(self) -> None:
        self._close()
        self.tid = _ident()
        try:
            self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.fd = -1

    def _close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def _forget(self) -> None:
        self.fd, self.tid = -1, 0  # the parent's descriptor: left open, never read here
