"""`perftop collect --listen [HOST:]PORT [--headless] [--duration S] [--record FILE]`"""

from __future__ import annotations

import argparse
from pathlib import Path

from perftop.cli.base import Command, seconds
from perftop.cli.extras import add_prometheus_option, build_extras
from perftop.console import interactive
from perftop.errors import UsageError
from perftop.fleet import link
from perftop.recording import default_path


class CollectCommand(Command):
    name = "collect"
    help = "gather the sessions nodes forward (perftop run --forward) into one view"
    description = (
        "Listen for `perftop run --forward HOST:PORT` on many nodes and show, record and "
        "export them as one session. Forwarders must prove the token: PERFTOP_TOKEN, or one "
        "generated and printed here. Binds loopback unless --listen names another address."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--listen",
            metavar="[HOST:]PORT",
            help=f"where to listen for forwarders (default 127.0.0.1:{link.DEFAULT_PORT}; "
            "none with --ssh unless given)",
        )
        parser.add_argument(
            "--ssh",
            metavar="[USER@]HOST",
            action="append",
            default=[],
            help="run CMD on HOST under perftop through ssh (PERFTOP_SSH overrides the ssh "
            "program) and collect its session over ssh's own channel; repeatable",
        )
        parser.add_argument(
            "--remote-dir",
            metavar="DIR",
            help="with --ssh: run CMD in DIR on the remote (default: the remote's $HOME)",
        )
        parser.add_argument(
            "--remote-record",
            metavar="FILE",
            help="with --ssh: also record on the remote, to FILE there (default: no "
            "recording there); the job's output goes on into it after the local side ends",
        )
        parser.add_argument("--headless", action="store_true", help="no TUI")
        parser.add_argument(
            "--duration", type=seconds, metavar="SECONDS", help="stop after this long"
        )
        rec = parser.add_mutually_exclusive_group()
        rec.add_argument("--record", metavar="FILE", type=Path, help="recording file")
        rec.add_argument("--no-record", action="store_true", help="do not record")
        parser.add_argument("--force", action="store_true", help="overwrite the recording")
        parser.add_argument(
            "--refresh", type=seconds, default=0.5, metavar="SECONDS", help="TUI refresh interval"
        )
        add_prometheus_option(parser)
        parser.add_argument(
            "cmd", nargs=argparse.REMAINDER, metavar="CMD ARGS...", help="the job, with --ssh"
        )

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        from perftop.flows.collect import CollectConfig, run_collect

        if args.duration is not None and not args.duration > 0:
            raise UsageError("--duration must be a positive number of seconds")
        if not args.refresh > 0:
            raise UsageError("--refresh must be a positive number of seconds")
        cmd = list(args.cmd)
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        if bool(cmd) != bool(args.ssh):
            raise UsageError(
                "--ssh HOST needs a command (perftop collect --ssh HOST -- python train.py)"
                if args.ssh
                else f"unexpected arguments: {' '.join(cmd)} (a command goes with --ssh)"
            )
        if not args.ssh and (args.remote_dir or args.remote_record):
            raise UsageError("--remote-dir and --remote-record go with --ssh")
        if args.listen is None and not args.ssh:
            args.listen = f"127.0.0.1:{link.DEFAULT_PORT}"
        listen = link.parse_addr(args.listen) if args.listen is not None else None
        token = link.token_from_env()
        made = token is None and listen is not None  # said once bound (flows.collect)
        if token is None:
            token = link.new_token() if listen is not None else ""  # "": nothing listens
        headless = args.headless or not interactive()
        cfg = CollectConfig(
            listen=listen,
            token=token,
            show_token=made,
            record=None if args.no_record else (args.record or default_path()),
            force=args.force,
            duration_s=args.duration,
            refresh_s=args.refresh,
            headless=headless,
            ssh=tuple(args.ssh),
            command=tuple(cmd),
            remote_dir=args.remote_dir,
            remote_record=args.remote_record,
        )
        extras = build_extras(args)
        try:
            return run_collect(cfg, on_snapshot=extras.on_snapshot())
        finally:
            extras.close()
