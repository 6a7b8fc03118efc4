"""`perftop export FILE --chrome-trace OUT.json | --csv OUT_DIR`"""

from __future__ import annotations

import argparse
import sys

from perftop.cli.base import Command
from perftop.console import say
from perftop.errors import RecordingError, UsageError
from perftop.recording import ReadStats


class ExportCommand(Command):
    name = "export"
    help = "export a recording as a Chrome trace (Perfetto) or CSV files"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", help="a .perftop recording")
        parser.add_argument(
            "--chrome-trace",
            metavar="OUT.json",
            help="Chrome trace JSON (chrome://tracing, Perfetto)",
        )
        parser.add_argument(
            "--csv",
            metavar="OUT_DIR",
            help="one CSV per kind: steps, processes, host, gpus, sync_sites, between, collectives",
        )

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        if not args.chrome_trace and not args.csv:
            raise UsageError("say what to export: --chrome-trace OUT.json and/or --csv OUT_DIR")
        for target in filter(None, (args.chrome_trace, args.csv)):
            if target == args.file:
                raise UsageError(f"{target}: would overwrite the recording")
        stats = ReadStats()
        try:
            if args.chrome_trace:
                from perftop.export.chrome import export_chrome

                n = export_chrome(args.file, args.chrome_trace, stats)
                if stats.events == 0:
                    raise RecordingError(f"{args.file}: no events in this recording")
                print(f"perftop: {n:,} trace events -> {args.chrome_trace}", file=sys.stderr)
            if args.csv:
                from perftop.export.tables import export_csv

                stats = ReadStats()
                rows = export_csv(args.file, args.csv, stats)
                if stats.events == 0:
                    raise RecordingError(f"{args.file}: no events in this recording")
                what = ", ".join(f"{k}.csv {v:,} rows" for k, v in rows.items())
                print(f"perftop: {args.csv}: {what}", file=sys.stderr)
        except OSError as exc:
            where = exc.filename or (args.csv if args.csv else args.chrome_trace)
            raise UsageError(
                f"{where}: cannot write: {exc.strerror} (the partial export is removed)"
            ) from None
        for w in stats.warnings:
            say(f"perftop: warning: {w}")
        return 0
