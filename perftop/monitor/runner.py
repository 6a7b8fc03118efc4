"""Launching a job under perftop: the hook injected through the environment, a socket to
hear it, the ingest loop, and the job's lifecycle as events."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import perftop
from perftop.errors import LaunchError
from perftop.events import JobExit, JobStart, SessionStart
from perftop.hook import ENV_SOCKET
from perftop.model import Session, Snapshot
from perftop.monitor.ingest import Ingest
from perftop.monitor.output import OutputTail
from perftop.monitor.server import Server
from perftop.recording import RecordingWriter

BOOTSTRAP_DIR = Path(perftop.__file__).resolve().parent / "_bootstrap"
DRAIN_S = 3.0

# A source factory is called as make(job) and returns an object with start() and stop();
# the probes are sources. The CLI decides which ones a job gets.
SourceFactory = Callable[["Job"], Any]


@dataclass(frozen=True, slots=True)
class RunConfig:
    command: tuple[str, ...]
    record: Path | None = None
    force: bool = False
    capture_output: bool = False  # the TUI owns the terminal: job output goes to a panel
    interval_s: float = 1.0  # probe sampling interval
    refresh_s: float = 0.5  # snapshot rate for the UI
    job_stdout_to_stderr: bool = False  # our stdout carries the session (--stream-out)


def hook_env(
    socket_path: str | os.PathLike[str], base: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment that injects the hook into every Python process of the job."""
    env = dict(os.environ if base is None else base)
    parts = [str(BOOTSTRAP_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env[ENV_SOCKET] = str(socket_path)
    return env


def resolve(command: tuple[str, ...]) -> str:
    if not command:
        raise LaunchError("no command given (try: perftop run python train.py)")
    exe = command[0]
    found = shutil.which(exe)
    if found is None:
        hint = f" (try: perftop run python {exe})" if exe.endswith(".py") else ""
        if os.sep in exe and os.path.isfile(exe):
            raise LaunchError(
                f"{exe}: not executable{hint or ' (chmod +x it, or name its interpreter)'}"
            )
        raise LaunchError(f"command not found: {exe}{hint}")
    return found


class Job:
    def __init__(
        self,
        cfg: RunConfig,
        on_snapshot: Callable[[Snapshot], None] | None = None,
        sources: Sequence[SourceFactory] = (),
        sinks: Sequence[Any] = (),
    ) -> None:
        """``sinks`` get the stream as the recording does (forwarders)."""
        self.cfg = cfg
        self._source_factories = tuple(sources)
        self.session = Session()
        self.recorder = (
            RecordingWriter(cfg.record, force=cfg.force) if cfg.record is not None else None
        )
        self.ingest = Ingest(
            self.session,
            self.recorder,
            on_snapshot=on_snapshot,
            refresh_s=cfg.refresh_s,
            rejected_frames=lambda: self.server.rejected_frames,
            sinks=sinks,
        )
        self.server = Server(self.ingest.submit_frame)
        self.proc: subprocess.Popen[bytes] | None = None
        self.output: OutputTail | None = None
        self.sources: list[Any] = []
        self.exit_code: int | None = None
        self._exit_lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> Job:
        exe = resolve(self.cfg.command)
        self.server.start()
        self.ingest.start()
        self.ingest.submit(
            SessionStart(
                t=time.time(),
                command=self.cfg.command,
                cwd=os.getcwd(),
                host=socket.gethostname(),
                monitor_pid=os.getpid(),
                perftop_version=perftop.__version__,
                record_path=str(self.cfg.record or ""),
            )
        )
        env = hook_env(self.server.path)
        kwargs: dict[str, Any] = {}
        if self.cfg.capture_output:
            self.output = OutputTail(self.ingest.submit)
            env["PYTHONUNBUFFERED"] = "1"
            kwargs.update(
                stdin=subprocess.DEVNULL,
                stdout=self.output.stdout,
                stderr=self.output.stderr,
                start_new_session=True,
            )
        elif self.cfg.job_stdout_to_stderr:
            kwargs["stdout"] = sys.stderr.fileno()
        try:
            self.proc = subprocess.Popen([exe, *self.cfg.command[1:]], env=env, **kwargs)
        except OSError as exc:
            self.close()
            raise LaunchError(f"cannot start {self.cfg.command[0]}: {exc.strerror}") from None
        self.ingest.submit(JobStart(time.time(), self.proc.pid, self.cfg.command))
        if self.output is not None:
            self.output.start()
        for make in self._source_factories:
            src = make(self)
            src.start()
            self.sources.append(src)
        return self

    def forward(self, signum: int) -> None:
        """Pass a signal on to the job (its whole process group when it has its own)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            if self.cfg.capture_output:
                os.killpg(self.proc.pid, signum)
            else:
                self.proc.send_signal(signum)
        except (ProcessLookupError, PermissionError):
            pass

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def reap(self) -> int:
        """Wait for the job's top process and record its exit, once, whoever asks first
        (the CLI, the TUI's watcher thread): 128+N when signal N killed it."""
        if self.proc is None:
            raise RuntimeError("Job.reap() before Job.start()")
        rc = self.proc.wait()
        with self._exit_lock:
            if self.exit_code is None:
                self.exit_code = rc if rc >= 0 else 128 - rc
                self.ingest.submit(JobExit(time.time(), self.proc.pid, self.exit_code))
        return self.exit_code

    def wait(self) -> int:
        """Wait for the job, then drain its last events and close the recording."""
        while True:
            try:
                code = self.reap()
                break
            except KeyboardInterrupt:  # the job got the same Ctrl-C; let it finish
                continue
        self.finish()
        return code

    def finish(self) -> None:
        """Record the exit if the job has ended, let the hooks' final flushes arrive, stop
        everything."""
        if self.poll() is not None:
            self.reap()
        deadline = time.monotonic() + DRAIN_S
        while self.server.open_connections and time.monotonic() < deadline:
            time.sleep(0.02)
        self.close()

    def close(self) -> None:
        for src in self.sources:
            try:
                src.stop()
            except Exception:
                pass
        if self.output is not None:
            self.output.stop()
        self.server.close()
        self.ingest.stop()

    def hand_over(self) -> int | None:
        """Leave the job running: hand the socket and the recording to a detached
        background recorder (its pid; None when not recording). The hooks reconnect to the
        same socket path by themselves; what they send meanwhile is dropped and counted."""
        from perftop.monitor import background

        rec = self.ingest.recorder
        path = rec.path if rec is not None and not rec.closed else None
        sock = self.server.path
        self.close()  # stops the server (unlinks the socket) and closes the recording
        if path is None or self.pid is None:
            return None
        return background.spawn(sock, path, self.pid)

    def snapshot(self, window: int | None = None) -> Snapshot:
        """Whole-run figures; only after :meth:`wait` (the ingest thread owns the session)."""
        return self.session.snapshot(window=window)


def install_signal_forwarding(job: Job) -> None:
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


def _terminal_foreground() -> bool:
    try:
        return os.isatty(sys.stdin.fileno()) and os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False
