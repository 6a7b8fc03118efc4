"""`perftop run [options] [--] CMD ARGS...`"""

from __future__ import annotations

import argparse

from perftop.cli.base import Command
from perftop.cli.launch import add_launch_options, launch
from perftop.errors import UsageError


class RunCommand(Command):
    name = "run"
    help = "run a training command with perftop watching it"
    description = (
        "Run CMD (python train.py, python -m pkg, torchrun ..., a shell script) with the "
        "perftop hook injected into every Python process, no code change needed. "
        "Exits with CMD's exit code."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_launch_options(parser)
        parser.add_argument(
            "cmd",
            nargs=argparse.REMAINDER,
            metavar="CMD ARGS...",
            help="the command to run (put -- before it if it has options)",
        )

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        cmd = list(args.cmd)
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        if not cmd:
            raise UsageError("no command given (try: perftop run python train.py)")
        return launch(args, tuple(cmd))
