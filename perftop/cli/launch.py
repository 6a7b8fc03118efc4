"""What `perftop run` and `perftop demo` share: the options and the launch itself."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perftop.cli.base import seconds
from perftop.cli.extras import add_forward_option, add_prometheus_option, build_extras
from perftop.console import interactive, say
from perftop.errors import UsageError
from perftop.recording import default_path

if TYPE_CHECKING:  # the monitor (psutil, fcntl) loads only when a job runs
    from perftop.monitor.jobenv import RunConfig


def add_launch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--headless", action="store_true", help="no TUI: record, print a short summary at exit"
    )
    rec = p.add_mutually_exclusive_group()
    rec.add_argument(
        "--record",
        metavar="FILE",
        type=Path,
        help="recording file (default: ./perftop-YYYYmmdd-HHMMSS.perftop)",
    )
    rec.add_argument("--no-record", action="store_true", help="do not record")
    p.add_argument("--force", action="store_true", help="overwrite an existing recording")
    p.add_argument(
        "--interval",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="probe sampling interval (default 1.0, at least 0.2)",
    )
    p.add_argument(
        "--refresh",
        type=seconds,
        default=0.5,
        metavar="SECONDS",
        help="TUI refresh interval (default 0.5 = 2 Hz); headless, snapshots (metrics) "
        "come once a second, or at this interval where it is longer",
    )
    add_forward_option(p)
    add_prometheus_option(p)
    p.add_argument(
        "--stream-out",
        action="store_true",
        help="write the session to stdout (the job's stdout goes to stderr); implies "
        "--headless: what `perftop collect --ssh` runs on the remote",
    )


def config_from_args(args: argparse.Namespace, command: tuple[str, ...]) -> RunConfig:
    from perftop.monitor.jobenv import RunConfig
    from perftop.probes.scheduler import check_interval

    check_interval(args.interval)
    if not args.refresh > 0:
        raise UsageError("--refresh must be a positive number of seconds")
    record = None if args.no_record else (args.record or default_path())
    return RunConfig(
        command=command,
        record=record,
        force=args.force,
        interval_s=args.interval,
        refresh_s=args.refresh,
    )


def probe_sources(cfg: RunConfig) -> list[Any]:
    """The probes started with every job: processes, host and GPUs, one sampler thread."""
    from perftop.probes import make_sources

    return [make_sources(cfg.interval_s)]


def use_tui(args: argparse.Namespace) -> bool:
    return not args.headless and interactive()


def launch(args: argparse.Namespace, command: tuple[str, ...], stop_when_lost: bool = False) -> int:
    cfg = replace(config_from_args(args, command), stop_when_lost=stop_when_lost)
    stream = getattr(args, "stream_out", False)
    if stream:
        args.headless = True
        cfg = replace(cfg, job_stdout_to_stderr=True)
    tui = use_tui(args)
    # In the TUI, the forwarder's news would garble the screen: it goes to the log only.
    extras = build_extras(args, log=(lambda s: None) if tui else say)
    if stream:
        from perftop.fleet.stream import StreamOut

        extras.sinks.append(StreamOut(sys.stdout.fileno(), log=say))
    try:
        from perftop.flows.run import run_headless, run_live

        if tui:
            try:
                import perftop.tui.app  # noqa: F401  (Textual may be missing: then headless)
            except ImportError:
                pass
            else:
                return run_live(
                    cfg, probe_sources(cfg), sinks=extras.sinks, on_snapshot=extras.on_snapshot()
                )
        return run_headless(
            cfg, probe_sources(cfg), sinks=extras.sinks, on_snapshot=extras.on_snapshot()
        )
    finally:
        extras.close()
