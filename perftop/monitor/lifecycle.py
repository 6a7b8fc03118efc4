"""Signals, and "leave it running" (the Job's :class:`Background` half).

Leaving a job running forks this monitor into the background once its threads are paused:
the child keeps the very same socket (the hooks stay connected, viewers can attach), the
session model and its history, the recording and the probes, and serves until the job's
top process is gone. The foreground process then exits without closing anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from perftop.events import JobExit, Note
from perftop.hook import ENV_SYNC_SEED
from perftop.monitor.outlive import Outlived, strays, survivors
from perftop.probes.alive import alive

if TYPE_CHECKING:
    from perftop.monitor.hub import Hub
    from perftop.monitor.nosocket import NoServer
    from perftop.monitor.server import Server

POLL_S = 0.5


class _Captures(Protocol):
    @property
    def capture_output(self) -> bool: ...


class SignalTarget(Protocol):
    """What the signal forwarding needs of :class:`~perftop.monitor.runner.Job`."""

    @property
    def cfg(self) -> _Captures: ...

    def forward(self, signum: int) -> None: ...


def install_signal_forwarding(job: SignalTarget) -> None:
    """SIGTERM/SIGHUP go to the job. SIGINT from the terminal already reached a job that
    shares our process group, so it is forwarded only when it cannot have (no terminal)."""

    def forward(signum: int, frame: Any) -> None:
        job.forward(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    if job.cfg.capture_output or not _terminal_foreground():
        signal.signal(signal.SIGINT, forward)
    else:
        signal.signal(signal.SIGINT, lambda s, f: None)


# Textual's driver takes these (Ctrl-Z and fg) and never gives them back: its SIGCONT
# handler restarts the app's terminal mode, which raises (no running event loop) in
# whatever the main thread does once the app is gone. A lost terminal sends SIGCONT with
# its SIGHUP when the terminal's shell exits, late when that shell is slow: it killed the
# monitor just before it forked into the background.
_APP_OWNS = (signal.SIGCONT, signal.SIGTSTP)


@contextlib.contextmanager
def tui_signals(on_stop: Callable[[], None]) -> Iterator[None]:
    """While a TUI runs, SIGTERM asks to stop the job; the old handlers (also of the
    signals the app took, ``_APP_OWNS``) come back afterwards. (SIGHUP, the terminal going
    away, is the terminal watch's: it leaves the job running, see
    ``perftop.tui.terminal_watch``.)"""
    old = {sig: signal.getsignal(sig) for sig in (*_APP_OWNS, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, lambda s, f: on_stop())
    try:
        yield
    finally:
        for sig, handler in old.items():
            if handler is not None:  # None: not set from Python, nothing to put back
                signal.signal(sig, handler)


def _terminal_foreground() -> bool:
    try:
        return os.isatty(sys.stdin.fileno()) and os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


class Background:
    """The Job's "leave it running" half (:class:`~perftop.monitor.runner.Job` inherits it)."""

    server: Server | NoServer
    hub: Hub
    sources: list[Any]
    output: Any
    detached: bool
    outlived: Outlived | None  # None until the job's top process has ended
    job_marker: str | None  # the job's own PERFTOP_SYNC_SEED (None: no hook, not known)
    _outlive_lock: threading.Lock
    if TYPE_CHECKING:  # the Job's own

        @property
        def pid(self) -> int | None: ...

        def finish(self) -> None: ...

    def _outlive(self, command: str, top: int, code: int, sig: int = 0) -> int:
        """The top process ended with ``code`` (``sig``: the signal that killed it, 0 where
        it exited): the session lasts while any hooked process of the job lives (see
        :mod:`perftop.monitor.outlive`); returns the job's code."""
        with self._outlive_lock:
            if self.outlived is None:
                o = Outlived(command, top, code, sig)
                self.server.settle()  # workers forked just before: known as such
                left = survivors(self.server.job_pids, top)
                if left:
                    self.hub.submit(
                        Note(
                            time.time(),
                            "warning",
                            "job",
                            f"the job's top process ({command}, pid {top}) ended (code {code}) "
                            f"while its training (pid {', '.join(map(str, left))}) goes on: "
                            "the session follows it until it exits",
                        )
                    )
                elif self.job_marker is not None:  # left running, never heard from
                    o.strays = strays(
                        top, ENV_SYNC_SEED, self.job_marker, set(self.server.peer_pids)
                    )
                    if o.strays:
                        self.hub.submit(Note(time.time(), "warning", "job", o.stray_words()))
                o.wait(self.server.job_pids)
                self.outlived = o
            return self.outlived.final

    def outlived_line(self) -> str | None:
        """One line when the session followed the training past its top process's end, or
        when that process left others running that the session did not follow."""
        o = self.outlived
        return o.line() if o is not None and (o.followed or o.strays) else None

    def leave(self) -> int | None:
        """Leave the job running: this monitor forks into the background (see the module
        doc), still serving the session (attachable), recording and probing. Returns the
        background pid in the foreground process, which should then exit; the background
        process never returns."""
        self.server.pause()
        self.hub.pause()
        paused: list[Any] = []
        for src in [*self.sources, self.output]:
            if src is None:
                continue
            if hasattr(src, "pause"):
                src.pause()
                paused.append(src)
            else:
                src.stop()
        self.hub.flush()
        # No flush of sys.stdout/stderr: the terminal may be gone, with the main thread
        # stuck writing to it; the child sends what it inherited in those buffers to
        # /dev/null.
        pid = os.fork()
        if pid:
            return pid
        try:
            self._carry_on(paused)
        finally:
            os._exit(0)

    def _carry_on(self, paused: list[Any]) -> None:
        for sig in _APP_OWNS:  # forked by the terminal watch while the app still ran
            with contextlib.suppress(ValueError):
                signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            with contextlib.suppress(ValueError):  # forked from a thread other than main
                signal.signal(sig, lambda s, f: stop.set())
        self.detached = True
        self.hub.snapshot_subscribers[:] = [
            fn for fn in self.hub.snapshot_subscribers if getattr(fn, "background_ok", False)
        ]
        self.hub.resume()
        self.server.start()
        for src in paused:
            src.start()
        self.sources = [s for s in self.sources if s in paused]
        self.hub.submit(
            Note(
                time.time(),
                "info",
                "background",
                f"perftop continued in the background (pid {os.getpid()}): still recording "
                "and attachable; the job's exit code cannot be known from here",
            )
        )
        pid = self.pid or 0
        while (alive(pid) or survivors(self.server.job_pids, pid)) and not stop.wait(POLL_S):
            pass
        if not alive(pid):
            self.hub.submit(JobExit(time.time(), pid, 0, known=False))
        self.finish()
