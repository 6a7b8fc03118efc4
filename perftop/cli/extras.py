"""`--forward` and `--prometheus`: what a launch or a collector adds to its stream.

A forwarder is an event sink (fed like the recording); the metrics endpoint reads
snapshots. Both are built before the job starts, so a bad address or a missing token is a
one-line error and no job runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perftop.cli.base import seconds
from perftop.console import say
from perftop.errors import UsageError
from perftop.fleet import link
from perftop.model import Snapshot


def add_prometheus_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prometheus",
        metavar="[HOST:]PORT",
        help="serve OpenMetrics at http://HOST:PORT/metrics (HOST defaults to 127.0.0.1)",
    )
    p.add_argument(
        "--prometheus-linger",
        metavar="SECONDS",
        type=_seconds,
        default=None,
        help="keep the endpoint up this long after the job ends, for a last scrape "
        "(default: until two scrapes saw the end, at most two scrape intervals)",
    )


def _seconds(text: str) -> float:
    v = seconds(text)
    if v > 3600:
        raise argparse.ArgumentTypeError(f"must be 0 to 3600 seconds: {text!r}")
    return v


def add_forward_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--forward",
        metavar="HOST:PORT",
        help="also send this session to `perftop collect` there (token in PERFTOP_TOKEN)",
    )


@dataclass
class Extras:
    sinks: list[Any] = field(default_factory=list)
    listeners: list[Callable[[Snapshot], object]] = field(default_factory=list)
    closers: list[Callable[[], None]] = field(default_factory=list)

    def on_snapshot(self) -> Callable[[Snapshot], object] | None:
        if not self.listeners:
            return None
        fns = tuple(self.listeners)

        def fan_out(snap: Snapshot) -> None:
            for fn in fns:
                fn(snap)

        return fan_out

    def close(self) -> None:
        """Stop the endpoint; sinks are closed by the ingest (again here, harmlessly,
        for a job that never started)."""
        for fn in self.closers:
            fn()
        for s in self.sinks:
            s.close()


def build_extras(args: argparse.Namespace, log: Callable[[str], None] = say) -> Extras:
    ex = Extras()
    fwd = getattr(args, "forward", None)
    if fwd:
        token = link.token_from_env()
        if token is None:
            raise UsageError(
                f"--forward needs the collector's token in {link.ENV_TOKEN} "
                "(`perftop collect` prints it)"
            )
        from perftop.fleet.forwarder import Forwarder

        addr = link.parse_addr(fwd)
        ex.sinks.append(Forwarder(addr, token, log=log))
    prom = getattr(args, "prometheus", None)
    if prom:
        from perftop.fleet.metrics import MetricsServer

        try:
            server = MetricsServer(prom, getattr(args, "prometheus_linger", None), log)
        except BaseException:
            for s in ex.sinks:
                s.close()
            raise
        ex.listeners.append(server.update)
        ex.closers.append(server.close)
        host, port = server.address
        log(f"perftop: metrics at http://{host!s}:{port}/metrics")
    return ex
