"""The job's stdout and stderr, when perftop stands between the job and its output: the
TUI owns the terminal, or ``--stream-out`` (ssh's pipes are our stdout and stderr).

The job writes to ordinary files (not pipes), so it never blocks on a slow reader and never
dies of a broken pipe if the monitor, its terminal or its ssh link goes away; a thread tails
the files into ``output`` events (the session, the recording, the stream) and may relay
them to a file descriptor, which it simply stops doing once that descriptor fails. What it
has read is punched out of the files, with space reserved ahead, and a keeper process takes
over if the monitor dies (see :mod:`perftop.monitor.outfiles`): their disk use stays small
however long the job writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO

from perftop.events import Event, Output
from perftop.monitor import outfiles, outrate

POLL_S = 0.1
MAX_LINE = 4096
KEEPER_WAIT_S = 2.0


def relay_to(fd: int) -> Callable[[bytes], bool]:
    """A relay writing to ``fd``; False once it fails (its reader is gone): stop relaying."""

    def write(data: bytes) -> bool:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            return False
        return True

    return write


class OutputTail:
    def __init__(
        self,
        submit: Callable[..., None],
        directory: str | None = None,
        relay: Callable[[bytes], bool] | None = None,
    ) -> None:
        """``relay``: also pass each complete piece of output on (see :func:`relay_to`)."""
        self.submit = submit
        self.relay = relay
        self.dir = tempfile.mkdtemp(prefix=outfiles.PREFIX, dir=directory)
        self._lock = outfiles.hold(self.dir)  # an owner lives: `perftop ls` leaves it alone
        self.paths = {name: os.path.join(self.dir, f"{name}.log") for name in ("stdout", "stderr")}
        self.stdout: IO[bytes] = open(self.paths["stdout"], "wb")  # noqa: SIM115
        self.stderr: IO[bytes] = open(self.paths["stderr"], "wb")  # noqa: SIM115
        self._readers = {name: open(p, "rb") for name, p in self.paths.items()}  # noqa: SIM115
        self._partial = {name: b"" for name in self.paths}
        mono = time.monotonic()
        self._buckets = {name: outrate.Bucket(mono) for name in self.paths}
        self._left = dict.fromkeys(self.paths, 0)  # bytes left out since the last marker
        self._marked = dict.fromkeys(self.paths, 0.0)
        self.left_out = 0  # bytes of output left out, in all
        # our own write ends, for fallocate (the job's may be closed here)
        self._wfds = {n: os.open(p, os.O_WRONLY | os.O_CLOEXEC) for n, p in self.paths.items()}
        self._punched = dict.fromkeys(self.paths, 0)
        self._reserved = dict.fromkeys(self.paths, 0)
        for name in self.paths:
            self._bound(name)
        self._keeper, self._lifeline = _start_keeper(self.dir)
        self._stop = threading.Event()
        self._paused = False
        self._show_partial = False
        self._thread = threading.Thread(target=self._loop, name="perftop-output", daemon=True)

    def show_partial(self) -> None:
        """At the next poll, pass on each stream's unfinished line as a line: a prompt
        (``input("overwrite? [y/N] ")``, pdb's ``(Pdb)``) ends with no newline, and the job
        waits on it: held back for its newline, it showed only once answered."""
        self._show_partial = True

    def start(self) -> None:
        # The child has its own copies of the write ends now.
        self.stdout.close()
        self.stderr.close()
        if self._paused:  # after a pause: a new thread on the same files
            self._paused = False
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._loop, name="perftop-output", daemon=True)
        self._thread.start()

    def pause(self) -> None:
        """Stop tailing without closing anything (before the monitor forks)."""
        self._paused = True
        self._stop.set()
        self._thread.join(timeout=2)

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            self.poll()
        if not self._paused:
            self.poll(final=True)

    def poll(self, final: bool = False) -> None:
        events: list[Event] = []
        now, mono = time.time(), time.monotonic()
        whole, self._show_partial = final or self._show_partial, False
        for name, f in self._readers.items():
            data = self._partial[name] + self._take(name, f, mono)
            self._bound(name)
            if data:
                head, sep, tail = data.rpartition(b"\n")
                if whole or len(tail) > MAX_LINE:
                    head, tail = data, b""
                elif not sep:
                    head = b""
                self._partial[name] = tail
                if head:
                    self._emit(name, head, now, mono, events)
            left = self._left[name]
            if left and (final or mono - self._marked[name] >= outrate.MARK_EVERY_S):
                events.append(Output(now, name, outrate.marker(left)))
                self._left[name], self._marked[name] = 0, mono
        if events:
            self.submit(*events)

    def _take(self, name: str, f: IO[bytes], mono: float) -> bytes:
        """What is new in ``name``'s file, ``READ_MAX`` at most. Without a relay, what the
        rate does not allow is skipped unread (the newest kept), and counted."""
        pos = f.tell()
        avail = os.fstat(f.fileno()).st_size - pos
        if avail <= 0:
            return b""
        want = min(avail, outrate.READ_MAX)
        if self.relay is not None:
            return f.read(want)
        allowed = self._buckets[name].allow(want, mono)
        if allowed < avail:
            self._left[name] += avail - allowed + len(self._partial[name])
            self.left_out += avail - allowed + len(self._partial[name])
            self._partial[name] = b""  # the rest of its line is left out
            f.seek(pos + avail - allowed)
        return f.read(allowed)

    def _emit(self, name: str, head: bytes, now: float, mono: float, out: list[Event]) -> None:
        """``head`` relayed whole, and as events in pieces of ``EVENT_MAX`` bytes, as far
        as the rate allows (with a relay: what it reads is over the rate only here)."""
        if self.relay is not None:
            if not self.relay(head if head[-1:] == b"\n" else head + b"\n"):
                self.relay = None  # its reader is gone: the job's output goes on here
            allowed = self._buckets[name].allow(len(head), mono)
            if allowed < len(head):
                self._left[name] += len(head) - allowed
                self.left_out += len(head) - allowed
                head = head[:allowed]
        for piece in outrate.pieces(head):
            out.append(Output(now, name, piece.decode("utf-8", "replace")))

    def _bound(self, name: str) -> None:
        """Punch out what was read; keep space reserved ahead of the job's writes."""
        fd = self._wfds[name]
        self._punched[name] = outfiles.punch(fd, self._punched[name], self._readers[name].tell())
        self._reserved[name] = outfiles.reserve(fd, os.fstat(fd).st_size, self._reserved[name])

    def stop(self) -> None:
        """The last output read; the files are then the keeper's, which removes them once
        no process of the job holds them (at once, usually)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        for f in self._readers.values():
            f.close()
        for fd in self._wfds.values():
            os.close(fd)
        os.close(self._lock)
        if self._keeper is None:
            outfiles.remove(self.dir)
            return
        os.close(self._lifeline)
        try:
            self._keeper.wait(timeout=KEEPER_WAIT_S)
        except subprocess.TimeoutExpired:
            pass  # the job's processes still write there: the keeper goes on alone


def _start_keeper(directory: str) -> tuple[subprocess.Popen[bytes] | None, int]:
    """The keeper (see :mod:`perftop.monitor.outfiles`) and our end of its lifeline."""
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", outfiles.__file__, directory, str(r)],
            pass_fds=(r,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        os.close(w)
        proc = None
    os.close(r)
    return proc, w
