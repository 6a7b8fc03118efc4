"""`perftop attach TARGET`: watch a running perftop session (read-only, with its history)
or, for a plain Python process, observe it from outside (observer mode)."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perftop.cli.base import Command
from perftop.errors import AttachError, UsageError
from perftop.recording import RecordingWriter
from perftop.report.text import summary

if TYPE_CHECKING:  # the monitor (psutil) loads only when the command runs
    from perftop.model import Snapshot
    from perftop.monitor.hub import Hub


class AttachCommand(Command):
    name = "attach"
    help = "watch a running perftop session, or observe a plain Python process"
    description = (
        "TARGET is a session (its socket, or any pid of its job, see 'perftop ls') or the "
        "pid of a Python process started without perftop, which is then observed from "
        "outside: its process tree, the host, GPUs, and stack samples through py-spy."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", metavar="TARGET", help="session socket, or a pid")
        parser.add_argument("--headless", action="store_true", help="no TUI: print a summary")
        parser.add_argument(
            "--duration", type=float, metavar="SECONDS", help="stop watching after this long"
        )
        parser.add_argument("--record", type=Path, metavar="FILE", help="record what is seen")
        parser.add_argument("--force", action="store_true", help="overwrite the recording")
        parser.add_argument(
            "--inject", action="store_true",
            help="observer mode, Python 3.14+: load the full hook into the process",
        )  # fmt: skip
        parser.add_argument(
            "--interval", type=float, default=1.0, metavar="SECONDS",
            help="observer mode: probe sampling interval (default 1.0)",
        )  # fmt: skip
        parser.add_argument(
            "--refresh", type=float, default=0.5, metavar="SECONDS",
            help="TUI refresh interval (default 0.5)",
        )  # fmt: skip
        parser.add_argument(
            "--ssh", metavar="[USER@]HOST",
            help="TARGET is on HOST: attach there through ssh (PERFTOP_SSH), no port opened",
        )  # fmt: skip
        parser.add_argument(
            "--stream-out", action="store_true",
            help="no TUI: write the session's framed stream to stdout (what --ssh runs)",
        )  # fmt: skip

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        from perftop.monitor.hub import Hub
        from perftop.monitor.viewer import Observer
        from perftop.probes.scheduler import check_interval

        check_interval(args.interval)
        if args.duration is not None and not args.duration > 0:
            raise UsageError("--duration must be a positive number of seconds")
        if args.ssh:
            from perftop.fleet.sshview import attach_ssh

            if args.stream_out:
                raise UsageError("--stream-out is what the remote runs: not with --ssh")
            return attach_ssh(args)
        hub = Hub(refresh_s=args.refresh)
        source = _source(args, hub)
        rec = None
        if args.record is not None:
            rec = RecordingWriter(args.record, force=args.force)
            hub.subscribe(rec, buffered=False, record_path=str(rec.path))
        out = None
        if args.stream_out:  # stdout carries only the stream; our lines go to stderr
            from perftop.fleet.stream import StreamOut

            out = StreamOut(sys.stdout.fileno(), log=_stderr_line)
            hub.subscribe(out, buffered=False)
        problem = source.check() if isinstance(source, Observer) else None
        if problem is not None:
            print(f"perftop: warning: {problem}", file=sys.stderr)
        hub.start()
        if args.inject:
            source.inject()
        source.start()
        try:
            if out is None and not args.headless and sys.stdout.isatty() and sys.stdin.isatty():
                _tui(hub, source, args)
            else:
                _wait(source, args.duration, out.gone if out is not None else None)
        finally:
            source.stop()
            hub.stop()
        if out is not None:
            return 0  # the reader has the session; a summary would only add noise
        snap = hub.session.snapshot(window=None)
        print(summary(snap, args.record), file=sys.stderr)
        for line in _stack_summary(snap):
            print(line, file=sys.stderr)
        return 0


def _source(args: argparse.Namespace, hub: Hub) -> Any:
    from perftop.monitor.registry import find_session, job_top
    from perftop.monitor.viewer import Observer, SessionViewer

    info = find_session(args.target)
    if info is not None:
        if args.inject:
            raise UsageError("--inject is for a process started without perftop")
        return SessionViewer(info["socket"], hub)
    if Path(args.target).suffix == ".sock":
        raise AttachError(f"{args.target}: no perftop session answers there (see perftop ls)")
    if not args.target.isdigit():
        raise UsageError(f"{args.target}: not a session or a pid (see perftop ls)")
    pid = int(args.target)
    top = job_top(pid)
    if top != pid:
        print(f"perftop: pid {pid} is a worker of pid {top}: observing {top}", file=sys.stderr)
    _check_observable(top)
    return Observer(top, hub, args.interval)


def _check_observable(pid: int) -> None:
    """Observer mode watches a Python training: refuse, in one line, perftop's own
    processes (a shell's tree holds this perftop, which it would end up sampling) and a
    process that is not Python (which would be watched forever with nothing to show)."""
    import os

    import psutil

    from perftop.monitor.inject import python_version
    from perftop.monitor.registry import has_torch

    try:
        proc = psutil.Process(pid)
        name = proc.name()
        mine = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    except psutil.NoSuchProcess:
        raise AttachError(f"no process with pid {pid}") from None
    except psutil.Error:
        return  # the Observer says what it cannot read
    python = python_version(pid) is not None or name.lower().startswith("python")
    if pid in mine and (python or pid == os.getpid()):
        raise AttachError(
            f"pid {pid} ({name}) runs this perftop: give the pid of a training (see perftop ls)"
        )
    if python:
        return
    try:
        found = [
            c.pid
            for c in proc.children(recursive=True)
            if c.pid not in mine and has_torch(c.pid) and not has_torch(c.ppid())
        ]
    except psutil.Error:
        found = []
    hint = f": its training is pid {found[0]}" if len(found) == 1 else ""
    more = ", …" if len(found) > 3 else ""
    hint = hint or (f": its trainings are pids {', '.join(map(str, found[:3]))}{more}" if found else "")
    raise AttachError(
        f"pid {pid} ({name}) is not a Python process perftop can observe{hint} (see perftop ls)"
    )


def _stderr_line(line: str) -> None:
    """With --stream-out, ssh may have closed stderr with stdout: say it if anyone hears."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _wait(source: Any, duration: float | None, gone: threading.Event | None = None) -> None:
    """Until the source ends, the duration passes, or the stream's reader is ``gone``."""
    end = None if duration is None else time.monotonic() + duration
    while not source.ended.is_set() and not (gone is not None and gone.is_set()):
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            return
        source.ended.wait(0.5 if left is None else min(0.5, left))


def _tui(hub: Hub, source: Any, args: argparse.Namespace) -> None:
    from perftop.monitor.viewer import Observer
    from perftop.tui.app import PerftopApp
    from perftop.tui.messages import SnapshotMessage

    mode = "observer" if isinstance(source, Observer) else "viewer"
    app = PerftopApp(ViewerController(hub), mode=mode)
    hub.snapshot_subscribers.append(lambda s: app.post_message(SnapshotMessage(s)))
    if args.duration is not None:
        threading.Timer(args.duration, lambda: app.call_from_thread(app.exit, None)).start()
    app.run()


class ViewerController:
    """A viewer never changes the job: quitting detaches; ``r`` records what is seen."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.rec: RecordingWriter | None = None

    def running(self) -> bool:
        return False  # nothing to stop: quit simply detaches

    def toggle_recording(self) -> str | None:
        from perftop.recording import default_path

        if self.rec is not None:
            self.hub.unsubscribe(self.rec)
            self.rec = None
            return None
        self.rec = RecordingWriter(default_path())
        self.hub.subscribe(self.rec, buffered=False, record_path=str(self.rec.path))
        return str(self.rec.path)


def _stack_summary(snap: Snapshot) -> list[str]:
    out = []
    for r in snap.stacks:
        top = ", ".join(f"{w} {s:.0%}" for w, s in r.where[:3])
        out.append(f"perftop: {r.role} {r.pid}: {top} ({r.samples} samples)")
    if snap.stalls:
        s = snap.stalls[-1]
        out.append(
            f"perftop: {len(snap.stalls)} stall(s); last: step {s.step}, {s.stalled_s:.1f} s"
        )
    return out
