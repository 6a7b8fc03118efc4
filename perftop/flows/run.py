"""``perftop run``: start the job and show it live in the TUI, acting on the user's quit
choice, or headless, waiting for it and printing a summary.

The job is started before the app takes the terminal (so a launch error is a plain
message), its snapshots are posted to the app from the hub's thread, and once the app
returns the job's owner stops it, leaves it running (the session goes on in the
background, attachable and recording), or waits for it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from perftop import gc_settle
from perftop.console import say
from perftop.flows.captures import follow_captures
from perftop.flows.notices import Notices, snapshot_every
from perftop.fmt import command as command_line
from perftop.model import Snapshot
from perftop.monitor.jobenv import RunConfig
from perftop.monitor.lifecycle import install_signal_forwarding, tui_signals
from perftop.monitor.runner import Job, SourceFactory
from perftop.report.text import summary
from perftop.safe import visible

if TYPE_CHECKING:  # Textual loads only for the TUI: a headless run works without it
    from perftop.tui.app import PerftopApp


class LiveController:
    """The app's handle on the job (see :class:`perftop.tui.app.Controller`): every
    question goes to the job's one lifecycle owner."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self._finish_lock = threading.Lock()
        self.finished = False

    def running(self) -> bool:
        return self.job.poll() is None

    def toggle_recording(self) -> str | None:
        if self.finished:
            raise RuntimeError("the job has ended: there is nothing more to record")
        return self.job.toggle_recording()

    def capture(self, steps: int, tell: Callable[[str, bool], object]) -> str:
        """``t``: ask the job's training processes for an op capture (see flows/trace)."""
        from perftop.flows.trace import Teller

        if self.finished or not self.running():
            return "the job has ended: there is nothing to capture"
        teller = Teller(tell)
        cid, pids = self.job.hub.capture(steps, "tui", teller)
        teller.until(set(pids), lambda: self.job.hub.captures.forget(cid))
        return f"capturing the next {steps} steps…" if pids else ""  # else told why

    def waiting_for_input(self) -> bool:
        """Whether the job is blocked reading its stdin (``input()``, ``breakpoint()``);
        its prompt, a line with no newline yet, is then shown."""
        waiting = self.job.input is not None and self.job.input.reading()
        if waiting and self.job.output is not None:
            self.job.output.show_partial()
        return waiting

    def send_input(self, line: str) -> bool:
        """``j``: a line to the job's stdin; False when it cannot take it."""
        return self.job.input is not None and self.job.input.send(line)

    def finish(self) -> None:
        """Drain the job's last events and close its recording, once: when the job exits
        (so the recording's timeline ends with the job, not when the user quits) or when
        the app returns, whichever comes first."""
        with self._finish_lock:
            if not self.finished:
                self.job.finish()
                self.finished = True

    def claim(self) -> bool:
        """Take the session away from :meth:`finish` to leave it running in the background
        (the watch thread must not close what the background monitor goes on serving);
        False when it has been finished already."""
        with self._finish_lock:
            if self.finished:
                return False
            self.finished = True
            return True


def run_live(
    cfg: RunConfig,
    sources: Sequence[SourceFactory] = (),
    *,
    refresh_s: float | None = None,
    sinks: Sequence[Any] = (),
    on_snapshot: Callable[[Snapshot], object] | None = None,
) -> int:
    """Run ``cfg.command`` under the TUI; returns the job's exit code (0 when left running).
    ``sinks`` (forwarders) get the stream; ``on_snapshot`` (metrics) each snapshot too."""
    from perftop.tui.app import PerftopApp
    from perftop.tui.failure import failure_of
    from perftop.tui.messages import SnapshotMessage, TerminalLost
    from perftop.tui.terminal_watch import TerminalWatch

    cfg = replace(cfg, capture_output=True, refresh_s=refresh_s or cfg.refresh_s)
    app = PerftopApp()

    def post(snap: Snapshot) -> None:
        app.post_message(SnapshotMessage(snap))  # thread-safe; coalesced by the app
        if on_snapshot is not None:
            on_snapshot(snap)

    # SIGHUP (the SSH session went away) and a hung-up terminal: see terminal_watch. Watched
    # from before the recording exists, so that no moment of the start-up can lose it.
    lost = "stop" if cfg.stop_when_lost else "leave"  # what a lost terminal does to the job
    tty = TerminalWatch(lambda: app.post_message(TerminalLost()), lambda: _conclude(ctl, lost))
    tty.start()
    try:
        job = Job(cfg, on_snapshot=post, sources=sources, sinks=sinks)
        follow_captures(job.hub)
        app.controller = ctl = LiveController(job)
        job.start()  # a LaunchError propagates before the terminal is taken over
    except BaseException:
        tty.close()
        raise
    threading.Thread(target=_watch, args=(ctl, app), name="perftop-watch", daemon=True).start()
    try:
        with tui_signals(lambda: app.exit("stop")):
            if not tty.lost:  # gone already: no app to show
                app.run()
    except Exception as exc:
        # the app died with its terminal (concluded as for any lost terminal), or failed
        if not tty.check() and app.failure is None:
            app.failure = failure_of(exc)
    finally:
        tty.release()  # never returns when the watch concluded in the app's place
        # Only a "stop" asked for (the quit dialog, SIGTERM) stops the job, whether or not
        # the app failed after. A terminal gone (looked at now: its reads fail before
        # SIGHUP comes) does what a lost terminal does to this job (``lost``); a failed app
        # or one that ended with no choice leave a running job to the background monitor.
        asked = "stop" if app.return_value == "stop" else "leave"
        choice = lost if tty.check() else asked
        if choice == "stop" and job.poll() is None:
            job.stop()
    if app.failure is not None:
        say(app.failure.line)
    return tty.done(_conclude(ctl, choice))


def _conclude(ctl: LiveController, choice: str | None) -> int:
    """After the app: leave a running job to the background monitor, or wait for it and
    close the recording. Also run by the terminal watch when the app never returns."""
    job = ctl.job
    if choice == "leave" and job.poll() is None and ctl.claim():
        return _leave(job)
    if choice == "stop" and job.poll() is None:
        job.stop()  # the terminal watch's, where the app never returned
    code = job.reap()
    ctl.finish()
    for problem in job.hub.cutoffs.problems:  # shown as notices in the app, now gone
        say(f"perftop: {problem}")
    outlived = job.outlived_line()
    if outlived:
        say(outlived)
    rec = job.recorder
    where = f"; recording: {rec.path}" if rec is not None else ""
    say(f"perftop: {command_line(job.cfg.command)} {job.ended_words()}{where}")
    return code


def _watch(ctl: LiveController, app: PerftopApp) -> None:
    """When the job ends: record its exit, end the session (the recording closes, its
    last snapshot reaches the app) and tell the app, which stays open to read it."""
    from perftop.tui.messages import JobEnded

    code = ctl.job.reap()
    ctl.finish()  # a no-op once the session was left to the background monitor
    app.post_message(JobEnded(code, ctl.job.ended_words()))


def _leave(job: Job) -> int:
    """The job goes on, and so does this session, in a background monitor."""
    path = job.recorder.path if job.recording() and job.recorder is not None else None
    sock = job.server.path
    bg = job.leave()
    where = f"session {sock}" if sock.name else "not attachable"  # no socket: see NoServer
    msg = f"perftop: job {job.pid} keeps running; {where} (background monitor pid {bg})"
    msg += f", recording to {path}" if path is not None else ", not recording"
    say(msg)
    say(f"perftop: see it again with: perftop attach {job.pid}")
    return 0


def run_headless(
    cfg: RunConfig,
    sources: Sequence[SourceFactory] = (),
    *,
    sinks: Sequence[Any] = (),
    on_snapshot: Callable[[Snapshot], object] | None = None,
) -> int:
    """Run ``cfg.command`` without a TUI: signals reach the job, a stall or a hang is one
    line when it is seen (flows/notices.py), a summary at its end. Snapshots (for the
    metrics, the stall and worker watches) come once a second at most: no screen shows
    them twice a second."""
    cfg = replace(cfg, refresh_s=snapshot_every(cfg.refresh_s, tui=False))
    if not cfg.job_stdout_to_stderr:  # (--stream-out: the reader's perftop says them)
        on_snapshot = Notices(on_snapshot)
    job = Job(cfg, on_snapshot=on_snapshot, sources=sources, sinks=sinks)
    follow_captures(job.hub)
    job.start()
    gc_settle.settle()
    install_signal_forwarding(job)
    rc = job.wait()
    try:
        line = job.outlived_line()
        if line:
            say(line)
        err = job.recorder.error if job.recorder is not None else None
        rec = job.recorder.path if job.recorder is not None else None
        print(visible(summary(job.snapshot(), rec, err)), file=sys.stderr, flush=True)
    except OSError:  # --stream-out: stderr was ssh's, gone with its reader
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stderr.fileno())  # what is left in its buffer goes nowhere
    return rc
