"""Watching what is already running: a perftop session (read-only viewer) or a plain
process (observer mode). Either way a local hub feeds the TUI or the headless summary, and
``--record`` subscribes a recording to it.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

import psutil

from perftop.errors import AttachError
from perftop.events import JobStart, Note, ObserverStart
from perftop.monitor import inject, stacks
from perftop.monitor.header import session_start
from perftop.monitor.hub import Hub
from perftop.monitor.sampler import StackSampler
from perftop.monitor.server import VIEW_MAGIC, Server
from perftop.monitor.stall import StallWatch
from perftop.peer import check_same_user
from perftop.wire import StreamError
from perftop.wire_stream import EventReader


class SessionViewer:
    """A read-only copy of a session's stream: header and history first, then live."""

    def __init__(self, socket_path: str | Path, hub: Hub) -> None:
        self.path = Path(socket_path)
        self.hub = hub
        self.ended = threading.Event()
        self.frames = 0
        self.reader = EventReader()  # ``reader.rejected``: frames lost on the way here
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(str(self.path))
            check_same_user(self._sock, "the session's socket")  # a planted one: never read
            self._sock.sendall(VIEW_MAGIC)
        except OSError as exc:
            self._sock.close()
            raise AttachError(f"{self.path}: cannot attach: {exc.strerror or exc}") from None
        self._thread = threading.Thread(target=self._loop, name="perftop-viewer", daemon=True)

    def start(self) -> SessionViewer:
        self._thread.start()
        return self

    def _loop(self) -> None:
        reader = self.reader
        try:
            while data := self._sock.recv(1 << 18):
                for frame, events in reader.feed(data):
                    self.frames += 1
                    self.hub.submit_frame(frame, events)
        except (OSError, StreamError):
            pass
        self.hub.submit(Note(time.time(), "info", "attach", "the session closed its stream"))
        self.ended.set()

    def stop(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(2)


class Observer:
    """A process without a hook: its tree, the host and GPUs, and stack samples."""

    def __init__(self, pid: int, hub: Hub, interval_s: float = 1.0) -> None:
        try:
            proc = psutil.Process(pid)
            cmd = tuple(proc.cmdline()) or (proc.name(),)
            started = proc.create_time()
        except psutil.NoSuchProcess:
            raise AttachError(f"no process with pid {pid}") from None
        except psutil.AccessDenied:
            raise AttachError(f"pid {pid}: not permitted to read it (another user's?)") from None
        self.pid, self.hub, self.command = pid, hub, cmd
        self.version = inject.python_version(pid)
        self.ended = threading.Event()
        from perftop.probes import make_sources

        self._probes = make_sources(interval_s)(self)
        self._sampler = StackSampler(pid, hub.submit)
        self._started = started
        self.server: Server | None = None  # only with --inject: the hook's socket
        self._watch = threading.Thread(target=self._wait, name="perftop-observe", daemon=True)

    def inject(self) -> None:
        """Load the full hook into the process (Python 3.14+), listening for it first."""
        ok, why = inject.can_inject(self.version)
        if not ok:
            raise AttachError(f"--inject: pid {self.pid}: {why}")
        self.server = Server(self.hub.submit_frame).start()
        try:
            inject.inject(self.pid, str(self.server.path))
        except (OSError, subprocess.SubprocessError) as exc:
            self.server.close()
            raise AttachError(f"--inject: pid {self.pid}: {exc}") from None

    def start(self) -> Observer:
        v = ".".join(map(str, self.version)) if self.version else ""
        now = time.time()
        self.hub.submit(
            session_start(self._started, self.command, cwd=_cwd(self.pid)),
            JobStart(self._started, self.pid, self.command),
        )
        if self.server is not None:
            self.hub.submit(Note(now, "info", "observer", f"hook injected into pid {self.pid}"))
        else:
            why = inject.can_inject(self.version)[1]
            self.hub.submit(
                ObserverStart(now, self.pid, v),
                Note(now, "info", "observer", "observer mode: " + why),
            )
        # Steps come only with an injected hook; stalls are then captured as in `run`.
        self.hub.snapshot_subscribers.append(StallWatch(self.pid, self.hub.submit))
        self._probes.start()
        self._sampler.start()
        self._watch.start()
        return self

    def check(self) -> str | None:
        """Why stacks cannot be read (one clear explanation), or None when they can."""
        try:
            stacks.dump(self.pid)
        except stacks.StackError as exc:
            why = stacks.permission_advice(self.pid) if exc.permission else str(exc)
            return f"cannot read the stacks of pid {self.pid}: {why}"
        return None

    def _wait(self) -> None:
        from perftop.probes.alive import alive

        while alive(self.pid) and not self.ended.wait(0.5):
            pass
        self.ended.set()

    def stop(self) -> None:
        self.ended.set()
        self._sampler.stop()
        self._probes.stop()
        if self.server is not None:
            self.server.close()


def _cwd(pid: int) -> str:
    try:
        return psutil.Process(pid).cwd()
    except psutil.Error:
        return ""
