"""`perftop report FILE [--json]`"""

from __future__ import annotations

import argparse
import json
import sys

from perftop.cli.base import Command
from perftop.recording import ReadStats
from perftop.report.build import build_report, session_from_file
from perftop.report.text import render


class ReportCommand(Command):
    name = "report"
    help = "summarize a recording"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", help="a .perftop recording")
        parser.add_argument("--json", action="store_true", help="machine-readable JSON")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        stats = ReadStats()
        session = session_from_file(args.file, stats)
        for w in stats.warnings:
            print(f"perftop: warning: {w}", file=sys.stderr)
        snap = session.snapshot(window=None)
        report = build_report(snap, stats)
        if args.json:
            json.dump(report, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            sys.stdout.write(render(report))
        return 0
