"""`perftop trace TARGET`: profile the next N whole steps of a running session's job, op by
op, and print what took the time (see perftop/flows/trace.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from perftop.cli.base import Command, seconds
from perftop.errors import UsageError


class TraceCommand(Command):
    name = "trace"
    help = "capture the next steps of a running session op by op (torch.profiler)"
    description = (
        "TARGET is a session (its socket, or any pid of its job or its monitor, see "
        "'perftop ls'). The job's hook profiles its next N whole steps and answers with the "
        "top ops by self time, each with its phase and the line of the job's code; the full "
        "trace (Chrome/Perfetto JSON) is saved beside the session's recording. Only the "
        "session's own user can ask."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", metavar="TARGET", help="session socket, or a pid")
        parser.add_argument(
            "--steps", type=int, default=3, metavar="N", help="whole steps to capture (default 3)"
        )
        parser.add_argument("--out", type=Path, metavar="FILE", help="copy the trace to FILE")
        parser.add_argument(
            "--timeout", type=seconds, default=60.0, metavar="SECONDS",
            help="give up after this long without an answer (default 60)",
        )  # fmt: skip

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        from perftop.flows.trace import MAX_STEPS, trace

        if not 1 <= args.steps <= MAX_STEPS:
            raise UsageError(f"--steps must be between 1 and {MAX_STEPS}")
        if not args.timeout > 0:
            raise UsageError("--timeout must be a positive number of seconds")
        return trace(args.target, args.steps, args.out, args.timeout)
