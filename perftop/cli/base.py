"""What every subcommand looks like."""

from __future__ import annotations

import argparse
import math
from typing import ClassVar, NoReturn


class Parser(argparse.ArgumentParser):
    """argparse with a bad option as one line (no usage block): what it says and where
    to look, exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def seconds(text: str) -> float:
    """The one argparse type of every option that takes seconds: a finite number, 0 or
    more (``nan``, ``inf`` and negatives are refused with one line)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, 0 or more: {text!r}")
    return v


class Command:
    name: ClassVar[str]
    help: ClassVar[str]
    description: ClassVar[str] = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        raise NotImplementedError
