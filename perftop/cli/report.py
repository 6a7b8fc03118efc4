"""`perftop report FILE [--json] [--from-step N --to-step M | --from-time S --to-time S]`"""

from __future__ import annotations

import argparse
import json
import sys

from perftop.cli.base import Command, seconds
from perftop.console import out, say
from perftop.errors import RecordingError
from perftop.hints.session import hinted_session
from perftop.model import Session
from perftop.model.fleet import FleetSession
from perftop.recording import ReadStats
from perftop.report.build import build_report, session_from_file
from perftop.report.slice import Slice, sliced_events
from perftop.report.text import render


def add_slice_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("slice (times in seconds since the session start)")
    g.add_argument("--from-step", type=int, metavar="N", help="from the N-th step (1 = first)")
    g.add_argument("--to-step", type=int, metavar="N", help="up to the N-th step, included")
    g.add_argument(
        "--from-time", type=seconds, metavar="S", help="from S seconds after the session start"
    )
    g.add_argument("--to-time", type=seconds, metavar="S", help="up to S seconds after the start")


def slice_of(args: argparse.Namespace) -> Slice:
    return Slice(args.from_step, args.to_step, args.from_time, args.to_time).check()


def load_session(path: str, sl: Slice, stats: ReadStats) -> Session | FleetSession:
    """The whole recording, or its slice, applied to a session."""
    if sl.empty:
        return session_from_file(path, stats)
    session = FleetSession(hinted_session)  # a collector's recording keeps its nodes apart
    session.apply_all(sliced_events(path, sl, stats))
    if stats.events == 0:
        raise RecordingError(f"{path}: no events in this recording")
    return session


def describe(sl: Slice) -> str:
    parts = []
    if sl.from_step is not None or sl.to_step is not None:
        parts.append(f"steps {sl.from_step or 1}…{sl.to_step if sl.to_step is not None else 'end'}")
    if sl.from_time is not None or sl.to_time is not None:
        to = f"{sl.to_time:g} s" if sl.to_time is not None else "end"
        parts.append(f"time {sl.from_time or 0:g} s…{to} after the session start")
    return ", ".join(parts)


class ReportCommand(Command):
    name = "report"
    help = "summarize a recording (or a slice of it)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", help="a .perftop recording")
        parser.add_argument("--json", action="store_true", help="machine-readable JSON")
        add_slice_options(parser)

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        stats = ReadStats()
        sl = slice_of(args)
        session = load_session(args.file, sl, stats)
        for w in stats.warnings:
            say(f"perftop: warning: {w}")
        snap = session.snapshot(window=None)
        report = build_report(snap, stats)
        if not sl.empty:
            report["slice"] = {
                "from_step": sl.from_step,
                "to_step": sl.to_step,
                "from_time_s": sl.from_time,
                "to_time_s": sl.to_time,
            }
        if args.json:
            json.dump(report, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            if not sl.empty:
                sys.stdout.write(f"slice: {describe(sl)}\n")
            out(render(report))  # names from the job's own code and command line
        return 0
