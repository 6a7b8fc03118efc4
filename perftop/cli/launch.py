"""What `perftop run` and `perftop demo` share: the options and the launch itself."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perftop.errors import UsageError
from perftop.recording import default_path
from perftop.report.text import summary

if TYPE_CHECKING:  # the monitor (psutil, fcntl) loads only when a job runs
    from perftop.monitor.runner import RunConfig


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
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="probe sampling interval (default 1.0, at least 0.2)",
    )
    p.add_argument(
        "--refresh",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="TUI refresh interval (default 0.5 = 2 Hz)",
    )


def config_from_args(args: argparse.Namespace, command: tuple[str, ...]) -> RunConfig:
    from perftop.monitor.runner import RunConfig
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
    return not args.headless and sys.stdout.isatty() and sys.stdin.isatty()


def launch(args: argparse.Namespace, command: tuple[str, ...]) -> int:
    cfg = config_from_args(args, command)
    if use_tui(args):
        try:
            from perftop.tui.live import run_live
        except ImportError:
            pass
        else:
            return run_live(cfg, probe_sources(cfg))
    return run_headless(cfg)


def run_headless(cfg: RunConfig) -> int:
    from perftop.monitor.runner import Job, install_signal_forwarding

    job = Job(cfg, sources=probe_sources(cfg))
    job.start()
    install_signal_forwarding(job)
    rc = job.wait()
    print(summary(job.snapshot(), cfg.record), file=sys.stderr)
    return rc
