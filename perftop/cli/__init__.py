"""The command line: argparse subcommands, each a small class, errors mapped in one place."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import perftop
from perftop.cli.attach import AttachCommand
from perftop.cli.base import Command, Parser
from perftop.cli.collect import CollectCommand
from perftop.cli.demo import DemoCommand
from perftop.cli.diff import DiffCommand
from perftop.cli.export import ExportCommand
from perftop.cli.ls import LsCommand
from perftop.cli.replay import ReplayCommand
from perftop.cli.report import ReportCommand
from perftop.cli.run import RunCommand
from perftop.cli.stdfds import ensure_std_fds
from perftop.cli.trace import TraceCommand
from perftop.console import say
from perftop.errors import PerftopError

COMMANDS: tuple[type[Command], ...] = (
    RunCommand,
    ReportCommand,
    ReplayCommand,
    ExportCommand,
    DiffCommand,
    DemoCommand,
    CollectCommand,
    LsCommand,
    AttachCommand,
    TraceCommand,
)

# Each subcommand's page of the documentation (docs/ in perftop's source tree, built into a
# site by `mkdocs build`): its --help names it.
DOCS_PAGES: dict[str, str] = {
    "run": "docs/getting-started.md",
    "report": "docs/recordings.md",
    "replay": "docs/recordings.md",
    "export": "docs/recordings.md",
    "diff": "docs/recordings.md",
    "demo": "docs/getting-started.md",
    "collect": "docs/distributed.md",
    "ls": "docs/attach.md",
    "attach": "docs/attach.md",
    "trace": "docs/attach.md",
}
DOCS_NOTE = "(perftop's source tree; `mkdocs serve` there shows the site)"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="perftop",
        description="htop for PyTorch training: where each step's time goes, live.",
        epilog=f"Documentation: docs/index.md {DOCS_NOTE}; each command's --help names its page.",
    )
    parser.add_argument("--version", action="version", version=f"perftop {perftop.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cls in COMMANDS:
        p = sub.add_parser(
            cls.name,
            help=cls.help,
            description=cls.description or cls.help,
            epilog=f"More: {DOCS_PAGES[cls.name]} {DOCS_NOTE}",
        )
        cmd = cls()
        cmd.add_arguments(p)
        p.set_defaults(handler=cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    ensure_std_fds()  # a stream the shell closed (`<&-`, `>&-`) is /dev/null from here on
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Command | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return handler.run(args, parser)
    except PerftopError as exc:
        say(f"perftop: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        print("perftop: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `perftop report x | head`
        return 0


def entry() -> None:
    sys.exit(main())
