"""Losing the terminal (an SSH connection drops, a tmux session is killed) ends the TUI
within seconds, whatever Textual does.

A dead terminal can hold Textual forever: its writer thread blocks on a tty that no longer
takes bytes, or its input thread spins on end-of-file. So the loss is noticed twice over,
by SIGHUP and by a thread that polls the terminal's file descriptors for a hang-up; the app
is asked to exit ("leave": a running job goes on), and if it has not returned within
``GRACE_S`` this thread concludes in its place (leave the job to the background
monitor, or close the recording of a job that ended) and ends the process with
``os._exit``. Exactly one of the two threads concludes: :meth:`TerminalWatch.release`
decides which.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

# The watch sleeps in poll() on the terminal's descriptors, which a hang-up ends at once;
# this long at most (a SIGHUP, or the watch stopped, is seen then): each wake-up of an idle
# thread costs ~0.3 ms of CPU, and it woke four times a second to look.
POLL_S = 1.0
GRACE_S = 3.0  # for the app to return once told the terminal is gone
GUARD_S = 30.0  # for the main thread to conclude (a stop may take 20 s) before we force it
HANGUP = select.POLLHUP | select.POLLERR | select.POLLNVAL


class TerminalWatch:
    """``ask_exit`` is called (from this thread) once the terminal is gone; ``conclude``
    returns perftop's exit code and runs here only if the app never returned."""

    def __init__(
        self,
        ask_exit: Callable[[], Any],
        conclude: Callable[[], int],
        fds: tuple[int, ...] = (0, 1, 2),
        grace_s: float = GRACE_S,
    ) -> None:
        self.ask_exit = ask_exit
        self.conclude = conclude
        self.grace_s = grace_s
        self.reason = ""
        self._fds = tuple(fd for fd in fds if _isatty(fd))
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._released = threading.Event()
        self._owner_lock = threading.Lock()
        self._owner = ""  # "main" or "watch": who concludes
        self._old_hup: Any = None
        self._thread = threading.Thread(target=self._run, name="perftop-tty-watch", daemon=True)

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def start(self) -> TerminalWatch:
        if threading.current_thread() is threading.main_thread():
            self._old_hup = signal.signal(signal.SIGHUP, self._on_sighup)
        self._thread.start()
        return self

    def _on_sighup(self, signum: int, frame: Any) -> None:
        self._lose("SIGHUP")

    def _lose(self, reason: str) -> None:
        if not self._lost.is_set():
            self.reason = reason
            self._lost.set()

    def hung_up(self, wait_s: float = 0.0) -> bool:
        """Whether any of the terminal's descriptors reports a hang-up (or is closed),
        waiting up to ``wait_s`` for one."""
        if not self._fds:
            self._lost.wait(wait_s)
            return False
        poller = select.poll()
        for fd in self._fds:
            poller.register(fd, 0)  # hang-ups and errors are always reported
        try:
            return any(ev & HANGUP for _, ev in poller.poll(int(wait_s * 1000)))
        except OSError:
            return True

    def check(self) -> bool:
        """Whether the terminal is gone, looking now (the app may fail before the watch
        thread's next look)."""
        if not self.lost and self.hung_up():
            self._lose("the terminal hung up")
        return self.lost

    def _run(self) -> None:
        while not self._lost.is_set():
            if self._stop.is_set():
                return
            if self.hung_up(POLL_S):
                self._lose("the terminal hung up")
        try:
            self.ask_exit()
        except Exception:
            pass
        if self._released.wait(self.grace_s) or not self._claim("watch"):
            # The main thread concludes; it ends the process itself (see done()).
            if not self._stop.wait(GUARD_S):
                os._exit(1)
            return
        code = 1
        try:
            code = self.conclude()
        finally:
            _exit(code)

    def _claim(self, who: str) -> bool:
        with self._owner_lock:
            if not self._owner:
                self._owner = who
            return self._owner == who

    def release(self) -> None:
        """Called by the main thread once the app returned (or failed): from here on it
        concludes, unless this watch already took over, in which case it waits for the
        process to end."""
        if not self._claim("main"):
            threading.Event().wait()  # the watch is concluding and will _exit
        self._released.set()

    def done(self, code: int) -> int:
        """The main thread concluded: stop watching; after a lost terminal, end the process
        now (nothing is left to say to it, and no thread may hold the exit)."""
        self.close()
        if self.lost:
            _exit(code)
        return code

    def close(self) -> None:
        """Stop watching (the job never started, or perftop concluded)."""
        self._claim("main")
        self._stop.set()
        if self._old_hup is not None:
            signal.signal(signal.SIGHUP, self._old_hup)
            self._old_hup = None


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _exit(code: int) -> None:
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    os._exit(code)
