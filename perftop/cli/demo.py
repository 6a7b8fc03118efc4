"""`perftop demo`: a bundled CPU training with real bottlenecks, under perftop."""

from __future__ import annotations

import argparse
import importlib.util
import sys

from perftop.cli.base import Command
from perftop.cli.launch import add_launch_options, launch, use_tui
from perftop.demo import TRAIN_MODULE
from perftop.errors import MissingDependency, UsageError

INSTALL_HINT = "perftop demo trains with torch, which is not installed: pip install 'perftop[demo]'"
HEADLESS_STEPS = 150  # without a screen there is no q to end it


class DemoCommand(Command):
    name = "demo"
    help = "watch a bundled training that has real bottlenecks"
    description = (
        "Runs a small CPU training under perftop: a starved input pipeline (a slow "
        "per-sample transform in 2 DataLoader workers) and sync-heavy loss code. It trains "
        "until you press q (then Enter or s stops it), or --steps steps; the screen stays open after."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_launch_options(parser)
        parser.add_argument(
            "--scenario",
            choices=("mixed", "input", "sync"),
            default="mixed",
            help="which bottleneck to show (default: both)",
        )
        parser.add_argument(
            "--steps",
            type=int,
            help=f"training steps (default: until q in the TUI, {HEADLESS_STEPS} headless)",
        )

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        # The monitor itself never needs torch (the hook uses the job's own), so perftop
        # installs without it; the demo runs in this interpreter and does.
        if importlib.util.find_spec("torch") is None:
            raise MissingDependency(INSTALL_HINT)
        if args.steps is not None and args.steps < 1:
            raise UsageError("--steps must be at least 1")
        cmd: tuple[str, ...] = (sys.executable, "-m", TRAIN_MODULE)
        cmd += ("--scenario", args.scenario)
        steps = args.steps
        if steps is None and (args.stream_out or not use_tui(args)):
            steps = HEADLESS_STEPS
        if steps is not None:
            cmd += ("--steps", str(steps))
        # a demo left running when its terminal goes (an SSH session drops) would train,
        # and record, until the disk is full: it stops then
        return launch(args, cmd, stop_when_lost=steps is None)
