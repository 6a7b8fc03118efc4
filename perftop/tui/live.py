"""``perftop run`` with the TUI: start the job, show it live, act on the user's quit choice.

The job is started before the app takes the terminal (so a launch error is a plain
message), its snapshots are posted to the app from the hub's thread, and once the app
returns the job's owner stops it, leaves it running (the session goes on in the
background, attachable and recording), or waits for it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace

from perftop.model import Snapshot
from perftop.monitor.lifecycle import tui_signals
from perftop.monitor.runner import Job, RunConfig, SourceFactory
from perftop.report.fmt import command as command_line
from perftop.tui.app import PerftopApp
from perftop.tui.messages import JobEnded, SnapshotMessage


class LiveController:
    """The app's handle on the job (see :class:`perftop.tui.app.Controller`): every
    question goes to the job's one lifecycle owner."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def running(self) -> bool:
        return self.job.poll() is None

    def toggle_recording(self) -> str | None:
        return self.job.toggle_recording()


def run_live(
    cfg: RunConfig, sources: Sequence[SourceFactory] = (), *, refresh_s: float | None = None
) -> int:
    """Run ``cfg.command`` under the TUI; returns the job's exit code (0 when left running)."""
    cfg = replace(cfg, capture_output=True, refresh_s=refresh_s or cfg.refresh_s)
    app = PerftopApp()

    def on_snapshot(snap: Snapshot) -> None:
        app.post_message(SnapshotMessage(snap))  # thread-safe; coalesced by the app

    job = Job(cfg, on_snapshot=on_snapshot, sources=sources)
    app.controller = LiveController(job)
    job.start()  # a LaunchError propagates before the terminal is taken over
    threading.Thread(target=_watch, args=(job, app), name="perftop-watch", daemon=True).start()
    choice: str | None = "stop"
    try:
        with tui_signals(lambda: app.exit("stop"), lambda: app.exit("leave")):
            choice = app.run()
    finally:
        if choice != "leave" and job.poll() is None:
            job.stop()  # also when the app itself failed: never orphan a job silently
    if choice == "leave" and job.poll() is None:
        return _leave(job)
    code = job.reap()
    job.finish()
    rec = job.recorder
    where = f"; recording: {rec.path}" if rec is not None else ""
    print(f"perftop: {command_line(cfg.command)} exited with code {code}{where}", file=sys.stderr)
    return code


def _watch(job: Job, app: PerftopApp) -> None:
    """Tell the session and the app when the job ends; the app stays open to read it."""
    app.post_message(JobEnded(job.reap()))


def _leave(job: Job) -> int:
    """The job goes on, and so does this session, in a background monitor."""
    path = job.recorder.path if job.recording() and job.recorder is not None else None
    sock = job.server.path
    bg = job.leave()
    msg = f"perftop: job {job.pid} keeps running; session {sock} (background monitor pid {bg})"
    msg += f", recording to {path}" if path is not None else ", not recording"
    with contextlib.suppress(OSError, ValueError):  # the terminal may be gone (SIGHUP)
        print(msg, file=sys.stderr)
        print(f"perftop: see it again with: perftop attach {job.pid}", file=sys.stderr)
    return 0
