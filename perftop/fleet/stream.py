"""The session as a byte stream on stdout, and a local reader for it through ssh.

``perftop run --stream-out`` writes the framed session (the socket's and the recording's
format) to its standard output: a sink like the forwarder, over a pipe instead of TCP, so
``ssh HOST perftop run --stream-out -- CMD`` carries a remote job's session over ssh's own
channel, no port opened. :class:`SshNode` runs that through the system ``ssh`` (or
``PERFTOP_SSH``) and feeds what comes back to a collector's ingest as one node.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from perftop.events import (
    FORMAT_VERSION,
    Event,
    JobExit,
    NodeLink,
    NodeScope,
    Note,
    Output,
    SessionStart,
)
from perftop.fleet.forwarder import Forwarder
from perftop.wire import MAGIC, Frame, StreamError, encode_node_frame
from perftop.wire_stream import EventReader

ENV_SSH = "PERFTOP_SSH"  # the ssh program (and options), e.g. "ssh -p 2222"
ENV_REMOTE = "PERFTOP_REMOTE"  # how to start perftop on the remote, e.g. "~/venv/bin/perftop"


class _FdWriter:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def settimeout(self, t: float) -> None:
        pass

    def close(self) -> None:
        pass


class StreamOut(Forwarder):
    """The forwarder's buffer and thread, writing to a file descriptor (stdout). A pipe
    cannot be reopened: once its reader is gone, frames are dropped and counted."""

    def __init__(self, fd: int, *, log: Callable[[str], None] = lambda s: None) -> None:
        self.fd = fd
        self.gone = threading.Event()  # the reader went away (ssh closed): nobody to tell

        def quiet(line: str) -> None:  # stderr may be ssh's too, gone with stdout
            try:
                log(line)
            except (OSError, ValueError):
                pass

        super().__init__(("stdout", 0), "", host="stdout", log=quiet)

    def _put(self, data: bytes, frame: Frame | None) -> None:
        if not self.gone.is_set():  # once gone, nothing is kept for a reader that never comes
            super()._put(data, frame)

    @property
    def _where(self) -> str:
        return "standard output"

    def _connect(self) -> Any:
        if self.connects:
            self.gone.set()
            raise OSError("the reader of standard output is gone")
        w = _FdWriter(self.fd)
        w.sendall(MAGIC)
        self.connects += 1
        return w

    def _pump(self, sock: Any) -> None:
        try:
            super()._pump(sock)
        except OSError:
            self.gone.set()  # before logging: stderr may have gone with stdout
            raise


def remote_perftop(args: str) -> str:
    """The shell command that runs ``perftop ARGS`` on the remote."""
    return f"{os.environ.get(ENV_REMOTE, 'perftop')} {args}"


def remote_command(
    command: Sequence[str], record: str | None = None, cwd: str | None = None
) -> str:
    """The shell command ssh runs on the remote for ``collect --ssh``: in ``cwd`` (else
    the remote's login directory, its ``$HOME``), recording there only to ``record``."""
    rec = f"--record {shlex.quote(record)}" if record else "--no-record"
    line = remote_perftop(f"run --headless {rec} --stream-out -- {shlex.join(command)}")
    return f"cd {shlex.quote(cwd)} && {line}" if cwd else line


def remote_attach(target: str) -> str:
    """The shell command ssh runs on the remote for ``attach --ssh``."""
    return remote_perftop(f"attach --stream-out {shlex.quote(target)}")


def ssh_argv(host: str, remote: str) -> list[str]:
    """The local argv: the system ssh (or ``PERFTOP_SSH``), HOST, the remote shell line."""
    return [*shlex.split(os.environ.get(ENV_SSH, "ssh")), host, remote]


# ssh's own words for the failures a user fixes on their side, and the fix.
_FIXES = (
    (
        "host key verification failed",
        "the host key of {node} is not known or has changed: connect once with "
        "'ssh {host}' to check and accept it",
    ),
    (
        "permission denied",
        "ssh could not log in to {node}: put your key in its authorized_keys, or load it "
        "with ssh-add",
    ),
)


def why_failed(rc: int, stderr_lines: Sequence[str], host: str = "HOST") -> str:
    """One line on why a remote perftop gave nothing usable, from ssh's exit and stderr."""
    last = next((x for x in reversed(stderr_lines) if x.strip()), "")
    if rc == 127 or "not found" in last:
        return (
            f"perftop is not installed on the remote (or not on its PATH; set "
            f"{ENV_REMOTE} to its path): {last or f'exit {rc}'}"
        )
    if rc == 255:
        said = " ".join(stderr_lines).lower()
        for words, fix in _FIXES:
            if words in said:
                return f"{fix.format(host=host, node=host.rpartition('@')[2])} ({last})"
        return f"ssh could not connect: {last or 'exit 255'}"
    return f"the remote sent no perftop session (exit {rc}): {last}"


class SshNode:
    """A remote job through ssh, as one node of a collector (a source: start, stop)."""

    def __init__(
        self,
        host: str,
        command: Sequence[str],
        submit_frame: Callable[[Frame, list[Event]], object],
        submit: Callable[..., None],
        log: Callable[[str], None],
        echo: bool = False,
        remote: str | None = None,
    ) -> None:
        """``echo``: also print the remote's output lines (headless). ``remote``: the
        remote shell line, instead of running ``command`` (e.g. :func:`remote_attach`)."""
        self.echo = echo
        self.host, self.node = host, host.rpartition("@")[2]
        self.argv = ssh_argv(host, remote if remote is not None else remote_command(command))
        self._submit_frame, self._submit, self._log = submit_frame, submit, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.err_tail: deque[str] = deque(maxlen=20)
        self.error = ""
        self.done = False  # the remote stream has ended (or never started)
        self.ended = threading.Event()  # the same, to wait on
        self.reader = EventReader()
        self.linked = threading.Event()  # the first frame came: ssh asks nothing more
        self.job_exit: int | None = None  # the remote job's exit code, once it has ended
        self.stopping = False  # we closed ssh: its exit code says nothing about the remote
        self._threads: list[threading.Thread] = []

    @property
    def rejected_frames(self) -> int:
        """Frames of the remote stream lost on the way (see :class:`EventReader`)."""
        return self.reader.rejected

    def start(self) -> SshNode:
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            self._fail(f"cannot run {self.argv[0]}: {exc.strerror}")
            self.done = True
            self.ended.set()
            return self
        for fn in (self._read, self._stderr):
            t = threading.Thread(target=fn, name=f"perftop-ssh-{self.node}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _stderr(self) -> None:
        if self.proc is None or self.proc.stderr is None:
            return
        for raw in self.proc.stderr:  # the remote job's output and perftop's own lines
            line = raw.decode(errors="replace").rstrip()
            self.err_tail.append(line)
            if line.startswith("perftop"):  # the job's own lines come in the stream too
                out = Output(time.time(), "stderr", line)
                self._submit(NodeScope(self.node), out, NodeScope(""))
            if self.echo:
                self._log(f"[{self.node}] {line}")

    def _read(self) -> None:
        try:
            self._read_stream()
        finally:
            self.done = True
            self.ended.set()

    def _read_stream(self) -> None:
        if self.proc is None or self.proc.stdout is None:
            return
        reader, fd, seen = self.reader, self.proc.stdout.fileno(), False
        try:
            while chunk := os.read(fd, 1 << 16):
                for frame, events in reader.feed(chunk):
                    if not seen:
                        seen = True
                        self.linked.set()
                        self._submit(NodeLink(time.time(), self.node, True, self.host, self.node))
                    if not self._deliver(frame, events):
                        self.proc.terminate()
                        return
        except (StreamError, OSError):
            pass  # not a perftop stream: explained below from ssh's stderr and exit code
        rc = self.proc.wait()
        for t in self._threads[1:]:
            t.join(timeout=2)
        if seen:
            self._submit(NodeLink(time.time(), self.node, False, self.host))
            if not self.stopping and self.job_exit is None and rc not in (0, None):
                last = next((x for x in reversed(self.err_tail) if x.strip()), "")
                self._log(f"perftop: {self.node}: the link ended (exit {rc}) {last}".rstrip())
        elif not self.stopping:
            self._fail(why_failed(rc, self.err_tail, self.host))

    def _deliver(self, frame: Frame, events: list[Event]) -> bool:
        for ev in events:
            if isinstance(ev, JobExit) and ev.known:
                self.job_exit = ev.exit_code
            if isinstance(ev, SessionStart) and ev.version > FORMAT_VERSION:
                self._fail(
                    f"the remote perftop writes format {ev.version}; this one reads up to "
                    f"{FORMAT_VERSION} (use the same perftop version on both sides)"
                )
                return False
        if frame.kind in (0, 1):
            self._submit_frame(
                encode_node_frame(self.node, frame), [NodeScope(self.node), *events, NodeScope("")]
            )
        return True

    def _fail(self, why: str) -> None:
        self.error = why
        self._log(f"perftop: {self.node}: {why}")
        self._submit(Note(time.time(), "error", "ssh", f"{self.node}: {why}"))

    def connect(self) -> bool:
        """Wait until the link is up or has failed (before a TUI takes the terminal:
        ssh's questions, an unknown host key or a passphrase, are asked in the terminal
        meanwhile); True when it is up."""
        while not self.linked.wait(0.1):
            if self.ended.is_set():
                return self.linked.is_set()
        return True

    def stop(self) -> None:
        """Closing our end of ssh; the remote job goes on (its perftop drops the stream)."""
        if self.proc is not None and self.proc.poll() is None:
            self.stopping = True
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
