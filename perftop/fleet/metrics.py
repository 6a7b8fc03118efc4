"""`--prometheus`: the latest snapshot as OpenMetrics, for a fleet's Prometheus and Grafana.

A custom collector reads the newest snapshot at scrape time (the ingest thread swaps one
reference and updates the endpoint's own small state under a lock; nothing in a global
registry is mutated), so a scrape costs the job nothing and always shows one consistent
moment. Metric names and labels are a contract (README, "Prometheus"). When the job ends,
the endpoint stays up for a last scrape or two (``--prometheus-linger``).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from perftop.errors import PerftopError, UsageError
from perftop.fleet.link import parse_addr
from perftop.fleet.metrics_families import families
from perftop.fleet.metrics_state import MetricsState
from perftop.model import Snapshot

LINGER_MAX_S = 60.0  # the automatic linger never exceeds this
LINGER_UNKNOWN_S = 30.0  # scraped once only: the interval is not known; wait at most this


class SnapshotMetrics:
    """A prometheus_client collector over the latest snapshot; ``update`` from any thread."""

    def __init__(self) -> None:
        self.snap: Snapshot | None = None
        self.state = MetricsState()
        self.lock = threading.Lock()
        self.scrapes: list[float] = []  # monotonic times of the latest scrapes
        self.ended_at: float | None = None  # monotonic time the job was first seen ended
        self.scrapes_after_end = 0

    def update(self, snap: Snapshot) -> None:
        now = snap.meta.now_t if snap.meta.now_t is not None else time.time()
        with self.lock:
            self.state.update(snap, now)
            self.snap = snap  # scrapes see a whole snapshot
            if snap.meta.ended or snap.meta.exit_code is not None:
                if self.ended_at is None:
                    self.ended_at = time.monotonic()
                self.scrapes_after_end = 0  # count the scrapes that saw this, the latest

    def describe(self) -> list[Any]:
        return []  # unchecked collector: families depend on the job

    def collect(self) -> Iterator[Any]:
        with self.lock:
            self.scrapes = [*self.scrapes[-4:], time.monotonic()]
            if self.ended_at is not None:
                self.scrapes_after_end += 1
            snap = self.snap
            if snap is None:
                return
            out = list(families(snap, self.state))
        yield from out

    def scrape_interval(self) -> float | None:
        """The median gap between the latest scrapes (None before two)."""
        with self.lock:
            gaps = sorted(b - a for a, b in zip(self.scrapes, self.scrapes[1:]))
        return gaps[len(gaps) // 2] if gaps else None

    def linger(self, seconds: float | None, log: Callable[[str], None]) -> None:
        """Stay up after the job ended: ``seconds`` from its end, or by default until two
        scrapes saw the end (at most two scrape intervals; none when nothing scraped)."""
        if self.ended_at is None or (not self.scrapes and seconds is None):
            return
        if seconds is None:
            interval = self.scrape_interval()
            wait = min(LINGER_MAX_S, 2 * interval + 0.5) if interval else LINGER_UNKNOWN_S
        else:
            wait = seconds
        deadline = self.ended_at + wait
        if deadline - time.monotonic() > 0.5:
            log(f"perftop: metrics stay up for a last scrape (up to {wait:.0f} s; Ctrl-C ends)")
        stop = threading.Event()
        old: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():  # Ctrl-C, SIGTERM: done
            for sig in (int(signal.SIGINT), int(signal.SIGTERM)):
                old[sig] = signal.signal(sig, lambda s, f: stop.set())
        try:
            while time.monotonic() < deadline and not stop.wait(0.05):
                if seconds is None and self.scrapes_after_end >= 2:
                    return
        except KeyboardInterrupt:
            return
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)


class MetricsServer:
    """The HTTP endpoint (``/metrics``) on its own daemon thread."""

    def __init__(
        self,
        spec: str,
        linger_s: float | None = None,
        log: Callable[[str], None] = lambda s: None,
    ) -> None:
        try:
            from prometheus_client import start_http_server
            from prometheus_client.registry import CollectorRegistry
        except ImportError:
            raise PerftopError(
                "--prometheus needs the prometheus_client package (pip install prometheus-client)"
            ) from None
        host, port = parse_addr(spec)
        self.linger_s, self.log = linger_s, log
        self.metrics = SnapshotMetrics()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.metrics)
        try:
            self._server, self._thread = start_http_server(port, host, registry=registry)
        except OSError as exc:
            raise UsageError(
                f"--prometheus: cannot listen on {host}:{port}: {exc.strerror}"
            ) from None
        self.address = self._server.server_address[:2]

    def update(self, snap: Snapshot) -> None:
        self.metrics.update(snap)

    def close(self) -> None:
        self.metrics.linger(self.linger_s, self.log)
        self._server.shutdown()
        self._server.server_close()
