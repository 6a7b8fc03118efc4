"""``perftop run`` with the TUI: start the job, show it live, act on the user's quit choice.

The job is started before the app takes the terminal (so a launch error is a plain
message), its snapshots are posted to the app from the hub's thread, and once the app
returns the job's owner stops it, leaves it running (the session goes on in the
background, attachable and recording), or waits for it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from perftop.model import Snapshot
from perftop.monitor.lifecycle import tui_signals
from perftop.monitor.runner import Job, RunConfig, SourceFactory
from perftop.report.fmt import command as command_line
from perftop.tui.app import PerftopApp
from perftop.tui.messages import JobEnded, SnapshotMessage, TerminalLost
from perftop.tui.terminal_watch import TerminalWatch


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
    on_snapshot: Callable[[Snapshot], None] | None = None,
) -> int:
    """Run ``cfg.command`` under the TUI; returns the job's exit code (0 when left running).
    ``sinks`` (forwarders) get the stream; ``on_snapshot`` (metrics) each snapshot too."""
    extra = on_snapshot
    cfg = replace(cfg, capture_output=True, refresh_s=refresh_s or cfg.refresh_s)
    app = PerftopApp()

    def on_snapshot(snap: Snapshot) -> None:
        app.post_message(SnapshotMessage(snap))  # thread-safe; coalesced by the app
        if extra is not None:
            extra(snap)

    # SIGHUP (the SSH session went away) and a hung-up terminal: see terminal_watch. Watched
    # from before the recording exists, so that no moment of the start-up can lose it.
    tty = TerminalWatch(lambda: app.post_message(TerminalLost()), lambda: _conclude(ctl, "leave"))
    tty.start()
    try:
        job = Job(cfg, on_snapshot=on_snapshot, sources=sources, sinks=sinks)
        app.controller = ctl = LiveController(job)
        job.start()  # a LaunchError propagates before the terminal is taken over
    except BaseException:
        tty.close()
        raise
    threading.Thread(target=_watch, args=(ctl, app), name="perftop-watch", daemon=True).start()
    choice: str | None = "stop"
    try:
        with tui_signals(lambda: app.exit("stop")):
            if not tty.lost:  # gone already: no app to show
                choice = app.run()
    except Exception:
        if not tty.check():
            raise
        # the app died with its terminal: conclude as for any lost terminal
    finally:
        tty.release()  # never returns when the watch concluded in the app's place
        if tty.lost:
            choice = "leave"  # whatever the dying app said
        if choice != "leave" and job.poll() is None:
            job.stop()  # also when the app itself failed: never orphan a job silently
    return tty.done(_conclude(ctl, choice))


def _conclude(ctl: LiveController, choice: str | None) -> int:
    """After the app: leave a running job to the background monitor, or wait for it and
    close the recording. Also run by the terminal watch when the app never returns."""
    job = ctl.job
    if choice == "leave" and job.poll() is None and ctl.claim():
        return _leave(job)
    code = job.reap()
    ctl.finish()
    rec = job.recorder
    where = f"; recording: {rec.path}" if rec is not None else ""
    _say(f"perftop: {command_line(job.cfg.command)} exited with code {code}{where}")
    return code


def _say(line: str) -> None:
    """One line to the terminal, which may be gone (then nobody is there to read it)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _watch(ctl: LiveController, app: PerftopApp) -> None:
    """When the job ends: record its exit, end the session (the recording closes, its
    last snapshot reaches the app) and tell the app, which stays open to read it."""
    code = ctl.job.reap()
    ctl.finish()  # a no-op once the session was left to the background monitor
    app.post_message(JobEnded(code))


def _leave(job: Job) -> int:
    """The job goes on, and so does this session, in a background monitor."""
    path = job.recorder.path if job.recording() and job.recorder is not None else None
    sock = job.server.path
    bg = job.leave()
    msg = f"perftop: job {job.pid} keeps running; session {sock} (background monitor pid {bg})"
    msg += f", recording to {path}" if path is not None else ", not recording"
    _say(msg)
    _say(f"perftop: see it again with: perftop attach {job.pid}")
    return 0
