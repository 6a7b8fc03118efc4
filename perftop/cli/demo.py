"""`perftop demo`: a bundled CPU training with real bottlenecks, under perftop."""

from __future__ import annotations

import argparse
import importlib.util
import sys

from perftop.cli.base import Command
from perftop.cli.launch import add_launch_options, launch
from perftop.errors import MissingDependency

INSTALL_HINT = "perftop demo trains with torch, which is not installed: pip install 'perftop[demo]'"


class DemoCommand(Command):
    name = "demo"
    help = "watch a bundled training that has real bottlenecks"
    description = (
        "Runs a small CPU training under perftop: a starved input pipeline (a slow "
        "per-sample transform in 2 DataLoader workers) and sync-heavy loss code."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_launch_options(parser)
        parser.add_argument(
            "--scenario",
            choices=("mixed", "input", "sync"),
            default="mixed",
            help="which bottleneck to show (default: both)",
        )
        parser.add_argument("--steps", type=int, default=150, help="training steps (default 150)")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        # The monitor itself never needs torch (the hook uses the job's own), so perftop
        # installs without it; the demo runs in this interpreter and does.
        if importlib.util.find_spec("torch") is None:
            raise MissingDependency(INSTALL_HINT)
        cmd = (
            sys.executable,
            "-m",
            "perftop.demo.train",
            "--scenario",
            args.scenario,
            "--steps",
            str(args.steps),
        )
        return launch(args, cmd)
