"""What every subcommand looks like."""

from __future__ import annotations

import argparse
from typing import ClassVar


class Command:
    name: ClassVar[str]
    help: ClassVar[str]
    description: ClassVar[str] = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        raise NotImplementedError
