"""Launching a job under perftop: the hook injected through the environment, a socket to
hear it (and to serve viewers), the hub, and the job's lifecycle as events."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from perftop.console import say
from perftop.errors import LaunchError
from perftop.events import JobExit, JobStart, Note
from perftop.hook import ENV_SYNC_SEED
from perftop.model import Snapshot
from perftop.model.snapshot import ended_words
from perftop.monitor.capture import serve_control
from perftop.monitor.header import session_start
from perftop.monitor.hookless import HooklessWatch
from perftop.monitor.hub import Hub
from perftop.monitor.jobanswers import JobAnswers
from perftop.monitor.jobenv import RunConfig, hook_env, live_lines, resolve
from perftop.monitor.jobinput import JobInput
from perftop.monitor.lifecycle import Background
from perftop.monitor.nosocket import NoServer
from perftop.monitor.outlive import become_subreaper, survivors
from perftop.monitor.outpass import relay_to
from perftop.monitor.output import OutputTail
from perftop.monitor.server import Server
from perftop.monitor.stall import StallWatch
from perftop.probes.alive import alive
from perftop.recording import RecordingWriter
from perftop.replay.autosave import index_after_recording

DRAIN_S = 3.0
STOP_ESCALATION = ((signal.SIGINT, 10.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))

# A source factory is called as make(job) and returns an object with start() and stop();
# the probes are sources. The CLI decides which ones a job gets.
SourceFactory = Callable[["Job"], Any]


class Job(Background, JobAnswers):
    """The one owner of a job's lifecycle: it starts the job and its hub (socket, probes,
    recording), forwards signals, stops it with escalation, leaves it running, and knows
    its exit code. The TUI and the CLI ask it; they hold no job state of their own."""

    def __init__(
        self,
        cfg: RunConfig,
        on_snapshot: Callable[[Snapshot], object] | None = None,
        sources: Sequence[SourceFactory] = (),
        sinks: Sequence[Any] = (),
    ) -> None:
        """``sinks`` get the stream as the recording does (forwarders). A command that
        cannot start is a LaunchError here, before a recording file is made."""
        self.cfg = cfg
        self.exe = resolve(cfg.command)
        self._source_factories = tuple(sources)
        self.hub = Hub(
            refresh_s=cfg.refresh_s,
            rejected_frames=lambda: self.server.rejected_frames,
            # headless: the line at once; under the TUI it is a notice, then a line at the end
            on_problem=None if cfg.capture_output else lambda text: say(f"perftop: {text}"),
        )
        self.session = self.hub.session
        if on_snapshot is not None:
            self.hub.snapshot_subscribers.append(on_snapshot)
        self.recorder: RecordingWriter | None = None
        if cfg.record is not None:
            self.recorder = RecordingWriter(
                cfg.record, force=cfg.force, on_close=index_after_recording
            )
            self.hub.subscribe(self.recorder, buffered=False)
        for sink in sinks:  # forwarders and streams buffer on their own: never blocking
            self.hub.subscribe(sink, buffered=False)
        control = partial(serve_control, self.hub)  # `perftop trace`, attach --allow-control
        self.server: Server | NoServer
        try:
            self.server = Server(
                self.hub.submit_frame, on_viewer=self._viewer, info=self.info, on_control=control
            )
        except OSError as exc:  # no socket here: the job runs all the same, without the hook
            self.server = NoServer(exc.strerror or str(exc))
        self.hub.captures.connect(self.server.send_to_trainers, self.server.path.parent)
        self.proc: subprocess.Popen[bytes] | None = None
        self.output: OutputTail | None = None
        self.input: JobInput | None = None  # the job's stdin under the TUI
        self.sources: list[Any] = []
        self.exit_code: int | None = None
        self.exit_signal = 0  # the signal that killed the top process, where it did
        self.started_t = time.time()
        self.detached = False  # forked into the background: the job is no longer our child
        self.hookless: HooklessWatch | None = None
        self._exit_lock = threading.Lock()
        self._outlive_lock = threading.Lock()
        self.outlived = None
        self.job_marker = None

    @property
    def ingest(self) -> Hub:  # the name the probes' factories used
        return self.hub

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> Job:
        exe = self.exe
        self.server.start()
        self.hub.start()
        self.hub.submit(
            session_start(
                self.started_t,
                self.cfg.command,
                record_path=str(self.recorder.path) if self.recorder is not None else "",
                output=(
                    "captured"
                    if self.cfg.capture_output or self.cfg.job_stdout_to_stderr
                    else "terminal"
                ),
            )
        )
        plain = dict(os.environ)  # the job's environment without the hook
        if isinstance(self.server, NoServer):
            self._without_hook(self.server.line())
            env = plain
        else:
            env = hook_env(self.server.path)
            self.job_marker = env[ENV_SYNC_SEED]
        kwargs: dict[str, Any] = {}
        if self.cfg.capture_output:
            self.output = OutputTail(self.hub.submit)
            live_lines(env, plain)
            kwargs.update(
                stdin=subprocess.PIPE,  # input() waits for a line from the TUI (j)
                stdout=self.output.stdout,
                stderr=self.output.stderr,
                start_new_session=True,
            )
        elif self.cfg.job_stdout_to_stderr:
            # Our stdout and stderr are ssh's: once its reader goes, a write there would
            # fail (EPIPE) and kill the job. The job writes to files; we relay them.
            self.output = OutputTail(self.hub.submit, relay=relay_to(sys.stderr.fileno()))
            live_lines(env, plain)
            kwargs.update(stdout=self.output.stdout, stderr=self.output.stderr)
        become_subreaper()  # the training outliving a wrapper stays ours: its exit code too
        argv = [exe, *self.cfg.command[1:]]
        try:
            try:
                self.proc = subprocess.Popen(argv, env=env, **kwargs)
            except OSError as exc:
                if exc.errno != errno.E2BIG or env is plain:
                    raise
                # the hook's PYTHONPATH entry took the environment over the kernel's limit
                self._without_hook(
                    "the job's environment is too large for perftop's PYTHONPATH entry "
                    "(E2BIG): the job runs without perftop's hook (no steps)"
                )
                env = plain
                self.proc = subprocess.Popen(argv, env=env, **kwargs)
        except OSError as exc:
            self.close()
            raise LaunchError(f"cannot start {self.cfg.command[0]}: {exc.strerror}") from None
        if self.proc.stdin is not None:
            self.input = JobInput(self.proc.stdin, self.proc.pid)
        self.hub.submit(JobStart(time.time(), self.proc.pid, self.cfg.command))
        self.hub.snapshot_subscribers.append(StallWatch(self.proc.pid, self.hub.submit))
        if env is not plain:  # with no hook, none connecting says nothing more
            self.hookless = HooklessWatch(self.proc.pid, self.hub.submit, self.server.peer_pids)
            self.hub.snapshot_subscribers.append(self.hookless)
        if self.output is not None:
            self.output.start()
        for make in self._source_factories:
            src = make(self)
            src.start()
            self.sources.append(src)
        return self

    def _without_hook(self, line: str) -> None:
        """The one line saying the job runs without the hook: at once on stderr headless,
        a notice under the TUI (and a note in the recording either way)."""
        self.hub.submit(Note(time.time(), "warning", "monitor", line))
        if not self.cfg.capture_output:
            say(f"perftop: {line}")

    # -- lifecycle -----------------------------------------------------------------------
    def forward(self, signum: int) -> None:
        """Pass a signal on to the job (its whole process group when it has its own)."""
        if self.proc is None or self.poll() is not None:
            return
        try:
            if self.cfg.capture_output:
                os.killpg(self.proc.pid, signum)
            elif self.proc.returncode is None:
                self.proc.send_signal(signum)
            else:  # its wrapper is gone: the training that outlived it
                for pid in survivors(self.server.job_pids, self.proc.pid):
                    os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def poll(self) -> int | None:
        if self.proc is None:
            return None
        if self.detached:  # no longer our child: alive or not is all we can know
            return None if alive(self.proc.pid) else -1
        rc = self.proc.poll()
        if rc is None or self.exit_code is not None:
            return rc
        # the training outlives its wrapper: the job goes on
        return None if survivors(self.server.job_pids, self.proc.pid) else rc

    def reap(self) -> int:
        """Wait for the job's top process and record its exit, once, whoever asks first
        (the CLI, the TUI's watcher thread): 128+N when signal N killed it."""
        if self.proc is None:
            raise RuntimeError("Job.reap() before Job.start()")
        rc = self.proc.wait()
        top, top_sig = (rc, 0) if rc >= 0 else (128 - rc, -rc)
        code = self._outlive(self.cfg.command[0], self.proc.pid, top, top_sig)
        # killed by a signal, where the code is the top process's own (not a survivor's)
        sig = top_sig if code == top else 0
        with self._exit_lock:
            if self.exit_code is None:
                self.exit_code, self.exit_signal = code, sig
                self.hub.submit(JobExit(time.time(), self.proc.pid, code, signal=sig))
        return self.exit_code

    def ended_words(self) -> str:
        """How the job ended, once reaped: ``exited with code N`` or ``was killed by
        SIGKILL (exit code 137)``."""
        return ended_words(self.exit_code, self.exit_signal)

    def stop(self) -> None:
        """SIGINT first (training loops save and exit on KeyboardInterrupt), then SIGTERM,
        then SIGKILL, each after a grace period."""
        for sig, grace in STOP_ESCALATION:
            self.forward(sig)
            deadline = time.monotonic() + grace
            while self.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.poll() is not None:
                return

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
        if self.poll() is not None and not self.detached:
            self.reap()
        deadline = time.monotonic() + DRAIN_S
        while self.server.open_connections and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.hookless is not None:
            self.hookless.finish()
        self.close()

    def close(self) -> None:
        for src in self.sources:
            try:
                src.stop()
            except Exception:
                pass
        if self.output is not None:
            self.output.stop()
        if self.input is not None:
            self.input.close()
        self.server.close()
        self.hub.stop()
        self.hub.captures.close()  # control connections send their last answers

    def snapshot(self, window: int | None = None) -> Snapshot:
        """Whole-run figures; only after :meth:`wait` (the hub thread owns the session)."""
        return self.session.snapshot(window=window)
