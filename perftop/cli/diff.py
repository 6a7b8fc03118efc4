"""`perftop diff A B [--json]`: two recordings compared figure by figure."""

from __future__ import annotations

import argparse
import json
import sys

from perftop.cli.base import Command
from perftop.cli.report import add_slice_options, load_session, slice_of
from perftop.console import out, say
from perftop.errors import UsageError
from perftop.recording import ReadStats
from perftop.report.build import build_report
from perftop.report.diff import between_steps_s, compare, figures, render


class DiffCommand(Command):
    name = "diff"
    help = "compare two recordings: step time, phases, data wait, workers, syncs, hints"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        # Optional for argparse so that a missing one is our one-line error, not its usage.
        parser.add_argument("a", nargs="?", help="the recording before (A)")
        parser.add_argument("b", nargs="?", help="the recording after (B)")
        parser.add_argument("--json", action="store_true", help="machine-readable JSON")
        add_slice_options(parser)

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        if args.b is None:
            given = "one was given" if args.a is not None else "none was given"
            raise UsageError(f"diff compares two recordings: perftop diff A B ({given})")
        sl = slice_of(args)
        side = []
        for path in (args.a, args.b):
            stats = ReadStats()
            session = load_session(path, sl, stats)
            for w in stats.warnings:
                say(f"perftop: warning: {w}")
            snap = session.snapshot(window=None)
            report = build_report(snap, stats)
            hints = {h.id for h in snap.hints}
            side.append((figures(snap, report, between_steps_s(session)), hints))
        d = compare(side[0][0], side[1][0], side[0][1], side[1][1])
        if args.json:
            json.dump({"a": args.a, "b": args.b, **d}, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            out(render(d, args.a, args.b))
        return 0
