"""How each process of the job ended, seen as it ended: an exit code, or the signal that
killed it (a rank killed by the kernel's OOM killer, a segfault), and when.

The monitor is the parent of the job's first process only; a rank or a worker is reaped by
its own parent (torchrun, the training process), so its status never reaches the monitor.
A pidfd (Linux 5.3) turns readable when its process ends, whoever its parent: one thread
polls the job's pidfds and reads each ended process's status from its zombie
(``/proc/PID/stat``'s ``exit_code``, Linux 3.5) before its parent reaps it. Where the
parent reaped it first, the end is still known, with no status. No pidfd (another OS, an
older kernel, a process not ours to open): nothing is watched, and no exit is said.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from perftop.events import Event, ProcExit
from perftop.probes.oomcount import OomCounts

_EXIT_CODE_FIELD = 52  # /proc/PID/stat, counted from 1 (pid is field 1)
# pidfds held at most: a descriptor each, within the 1,024 a process may often open, so a
# job of thousands of processes (Ray's) never leaves the monitor short of descriptors
MAX_WATCHED = 256


def zombie_status(pid: int) -> int | None:
    """``pid``'s ``waitpid`` status while it is a zombie (None: reaped, or not ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # from field 3 (state) on
    if not fields or fields[0] != b"Z" or len(fields) < _EXIT_CODE_FIELD - 2:
        return None
    try:
        return int(fields[_EXIT_CODE_FIELD - 3])
    except ValueError:
        return None


class ExitWatch:
    """Polls the pidfds of the pids :meth:`watch` is given; each end is a ``ProcExit``,
    given to ``submit`` at once (the hub's: a rank's death is said as it happens, and the
    last ones before the job's own end are not left for a probe tick that never comes),
    or kept for :meth:`take` without one."""

    def __init__(self, submit: Callable[..., None] | None = None) -> None:
        self.submit = submit
        self.available = hasattr(os, "pidfd_open") and hasattr(select, "poll")
        self._fds: dict[int, int] = {}  # pid -> its pidfd
        self._ended: list[ProcExit] = []
        self._pending: list[tuple[int, int]] = []  # (pid, pidfd) for the poll to register
        self._lock = threading.Lock()
        self._poll = select.poll() if self.available else None
        self._wake_r, self._wake_w = os.pipe() if self.available else (-1, -1)
        self._thread: threading.Thread | None = None
        self._stop = False
        # pid -> where its memory cgroup counts OOM kills, as the process probe last read
        # it (a zombie's cgroup reads as the root's: it is known before its end or not at all)
        self._files: dict[int, str] = {}
        # pids whose end was said, while still in the tree: a zombie its parent has not
        # reaped yet is not watched again (its end would be said twice)
        self._said: set[int] = set()
        self._ooms = OomCounts(read=self.available)

    def watch(self, pids: Iterable[int], oom_files: dict[int, str] | None = None) -> None:
        """Watch each of ``pids`` not watched yet (the probe's tick: the job's tree), each
        end weighed against its memory cgroup's OOM kills where ``oom_files`` names where
        they are counted, else against the host's."""
        if not self.available or self._stop:
            return
        order = list(pids)  # the tree's order: the first MAX_WATCHED are the nearest
        wanted = set(order)
        with self._lock:  # the watched pids' and the new ones' (the poll thread pops ends)
            files = {p: f for p, f in self._files.items() if p in self._fds}
            files.update((p, f) for p, f in (oom_files or {}).items() if p in wanted)
            self._files = files
            # a pid gone from the tree was reaped; back in it and no zombie, it is another
            # process's (a pid reused)
            said = self._said = {p for p in self._said & wanted if zombie_status(p) is not None}
        self._ooms.tick(set(files.values()))
        added = []
        for pid in order:
            if pid in self._fds or pid in said or len(self._fds) >= MAX_WATCHED:
                continue
            try:
                fd = os.pidfd_open(pid)
            except OSError:  # gone already, or not ours
                continue
            self._fds[pid] = fd
            added.append((pid, fd))
        if not added:
            return
        with self._lock:
            self._pending += added
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="perftop-exits", daemon=True)
            self._thread.start()
        else:  # the poll takes them at once, not at its next timeout
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")

    def take(self) -> list[ProcExit]:
        """The ends seen since the last call (without ``submit``)."""
        with self._lock:
            out, self._ended = self._ended, []
        return out

    def close(self) -> None:
        self._stop = True
        if self.available:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(2.0)
        with self._lock:
            fds, self._fds = list(self._fds.values()), {}
        for fd in (*fds, self._wake_r, self._wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wake_r = self._wake_w = -1

    def _loop(self) -> None:
        poll = self._poll
        if poll is None:
            return
        poll.register(self._wake_r, select.POLLIN)
        by_fd: dict[int, int] = {}  # pidfd -> pid
        while not self._stop:
            with self._lock:
                pending, self._pending = self._pending, []
            for pid, fd in pending:
                by_fd[fd] = pid
                poll.register(fd, select.POLLIN)
            try:
                ready = poll.poll()  # until an end, a new pid or close(): no idle wake-up
            except OSError:
                return
            t = time.time()
            for fd, _mask in ready:
                if fd == self._wake_r:
                    with contextlib.suppress(OSError):
                        os.read(fd, 4096)
                    continue
                if fd not in by_fd:
                    continue
                pid = by_fd.pop(fd)
                poll.unregister(fd)
                status = zombie_status(pid)
                with self._lock:
                    file = self._files.pop(pid, None)
                    self._said.add(pid)
                # a SIGKILL, or a status its parent reaped first, may be an OOM kill's
                ooms, where, on_host = self._ooms.at_end(file, status in (None, 9))
                self._fds.pop(pid, None)
                with contextlib.suppress(OSError):
                    os.close(fd)
                ev = ProcExit(t, pid, status, ooms, where, on_host if where else None)
                if self.submit is not None:
                    with contextlib.suppress(Exception):  # a hub gone: the end goes unsaid
                        self.submit(ev)
                    continue
                with self._lock:
                    self._ended.append(ev)


class ExitProbe:
    """The probe-tick face of :class:`ExitWatch`: each tick watches the tree the process
    probe just walked (``procs.pids``); the ends go to ``submit`` as they come."""

    name = "exits"

    def __init__(self, procs: Any, submit: Callable[..., None]) -> None:
        self.procs = procs
        self.exits = ExitWatch(submit)

    def sample(self, t: float) -> list[Event]:
        self.exits.watch(self.procs.pids, self.procs.oom_files())
        return []

    def close(self) -> None:
        self.exits.close()
