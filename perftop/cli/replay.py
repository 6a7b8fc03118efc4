"""`perftop replay [FILE]`: the live screen, fed from a recording."""

from __future__ import annotations

import argparse
from pathlib import Path

from perftop.cli.base import Command
from perftop.console import interactive, say
from perftop.errors import RecordingError, UsageError
from perftop.recording import SUFFIX


def latest_recording(where: Path) -> Path:
    """The most recently written recording in ``where``."""
    found = [p for p in where.glob(f"*{SUFFIX}") if p.is_file()]
    if not found:
        raise RecordingError(f"{where}: no {SUFFIX} recording here (give a file)")
    return max(found, key=lambda p: p.stat().st_mtime)


class ReplayCommand(Command):
    name = "replay"
    help = "replay a recording in the TUI (play, pause, seek, jump to stalls)"
    description = (
        "Replay a recording with the live screen. Keys: space/p play-pause, [ ] speed "
        "(0.25x-64x), a as fast as possible, , . one event back/forward, < > one second, "
        "g go to a step or time, n next stall, b next between-steps interval, "
        "h next hint change, q quit."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "file", nargs="?", help="a .perftop recording (default: the newest one here)"
        )
        parser.add_argument(
            "--paused", action="store_true", help="open paused at the start instead of playing"
        )

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        path = Path(args.file) if args.file else latest_recording(Path.cwd())
        from perftop.tui.replay import make_replay

        app, ctl = make_replay(path, playing=not args.paused)  # bad files fail here
        if not interactive():
            ctl.player.close()
            raise UsageError(f"replay needs a terminal; `perftop report {path}` prints a summary")
        from perftop.flows.watch import run_viewer

        ctl.start()
        try:
            run_viewer(app)
        finally:
            ctl.stop()
        for w in ctl.index.warnings():
            say(f"perftop: warning: {w}")
        return 0
