"""``perftop run`` with the TUI: start the job, show it live, act on the user's quit choice.

The job is started before the app takes the terminal (so a launch error is a plain
message), its snapshots are posted to the app from the ingest thread, and once the app
returns the job is stopped, left running (with a background recorder), or awaited.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import perftop
from perftop.events import Hello, JobStart, LoaderInfo, SessionStart
from perftop.model import Snapshot
from perftop.monitor.runner import Job, RunConfig, SourceFactory
from perftop.recording import RecordingWriter, default_path
from perftop.report.fmt import command as command_line
from perftop.tui.app import PerftopApp
from perftop.tui.messages import JobEnded, SnapshotMessage, TerminalLost
from perftop.tui.terminal_watch import TerminalWatch

STOP_GRACE_S = 10.0


class LiveController:
    """The app's handle on the job (see :class:`perftop.tui.app.Controller`)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.last: Snapshot | None = None

    def running(self) -> bool:
        return self.job.poll() is None

    def toggle_recording(self) -> str | None:
        ing = self.job.ingest
        if ing.recorder is not None and not ing.recorder.closed:
            old = ing.set_recorder(None)
            if old is not None:
                old.close()
            return None
        rec = RecordingWriter(default_path())
        rec.write_events(self._preamble(str(rec.path)))
        ing.set_recorder(rec)
        return str(rec.path)

    def _preamble(self, path: str) -> list[Any]:
        """What a recording started mid-run needs to be read on its own: the session,
        the job and the processes the hooks introduced so far."""
        cfg, now = self.job.cfg, time.time()
        evs: list[Any] = [
            SessionStart(
                now,
                cfg.command,
                os.getcwd(),
                socket.gethostname(),
                os.getpid(),
                perftop.__version__,
                record_path=path,
            ),
            JobStart(now, self.job.pid or 0, cfg.command),
        ]
        snap = self.last
        if snap is not None:
            for t in snap.trainers:
                evs.append(
                    Hello(
                        now,
                        t.pid,
                        t.ppid,
                        t.host,
                        t.argv,
                        t.rank,
                        t.local_rank,
                        t.world_size,
                        t.torch_version,
                        t.device,
                    )
                )
            for ld in snap.loaders:
                evs.append(
                    LoaderInfo(
                        ld.t,
                        ld.pid,
                        ld.loader_id,
                        ld.num_workers,
                        ld.batch_size,
                        ld.pin_memory,
                        ld.prefetch_factor,
                        ld.persistent_workers,
                        ld.workers,
                        ld.dataset,
                    )
                )
        return evs


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
    ctl: LiveController | None = None

    def on_snapshot(snap: Snapshot) -> None:
        if ctl is not None:
            ctl.last = snap
        app.post_message(SnapshotMessage(snap))  # thread-safe; coalesced by the app
        if extra is not None:
            extra(snap)

    # SIGHUP (the SSH session went away) and a hung-up terminal: see terminal_watch. Watched
    # from before the recording exists, so that no moment of the start-up can lose it.
    tty = TerminalWatch(lambda: app.post_message(TerminalLost()), lambda: _conclude(job, "leave"))
    tty.start()
    try:
        job = Job(cfg, on_snapshot=on_snapshot, sources=sources, sinks=sinks)
        ctl = LiveController(job)
        app.controller = ctl
        job.start()  # a LaunchError propagates before the terminal is taken over
    except BaseException:
        tty.close()
        raise
    threading.Thread(target=_watch, args=(job, app), name="perftop-watch", daemon=True).start()
    old = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda s, f: app.exit("stop"))
    choice: str | None = "stop"
    try:
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
        signal.signal(signal.SIGTERM, old)
        if choice != "leave" and job.poll() is None:
            _stop(job)  # also when the app itself failed: never orphan a job silently
    return tty.done(_conclude(job, choice))


def _conclude(job: Job, choice: str | None) -> int:
    """After the app: leave a running job to the background recorder, or wait for it and
    close the recording. Also run by the terminal watch when the app never returns."""
    if choice == "leave" and job.poll() is None:
        return _leave(job)
    rc = _finish(job)
    rec = job.ingest.recorder
    where = f"; recording: {rec.path}" if rec is not None else ""
    _say(f"perftop: {command_line(job.cfg.command)} exited with code {rc}{where}")
    return rc


def _say(line: str) -> None:
    """One line to the terminal, which may be gone (then nobody is there to read it)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _watch(job: Job, app: PerftopApp) -> None:
    """Tell the session and the app when the job ends; the app stays open to read it."""
    app.post_message(JobEnded(job.reap()))


def _stop(job: Job) -> None:
    """SIGINT first (training loops save and exit on KeyboardInterrupt), then SIGTERM,
    then SIGKILL, each after a grace period."""
    for sig, grace in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        job.forward(sig)
        deadline = time.monotonic() + grace
        while job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if job.poll() is not None:
            return


def _finish(job: Job) -> int:
    """Wait for the job, give the hooks' last frames time to arrive, close everything."""
    code = job.reap()
    job.finish()
    return code


def _leave(job: Job) -> int:
    """The job goes on; a background recorder takes the recording over."""
    rec = job.ingest.recorder
    path = rec.path if rec is not None and not rec.closed else None
    bg = job.hand_over()
    msg = f"perftop: job {job.pid} keeps running"
    if bg is not None:
        msg += f"; recording continues to {path} (background recorder pid {bg})"
    else:
        msg += " (not recording)"
    _say(msg)
    return 0
