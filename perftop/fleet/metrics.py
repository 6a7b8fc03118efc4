"""`--prometheus`: the latest snapshot as OpenMetrics, for a fleet's Prometheus and Grafana.

A custom collector reads the newest snapshot at scrape time (the ingest thread swaps one
reference; nothing in a global registry is mutated), so a scrape costs the job nothing and
always shows one consistent moment. Metric names and labels are a contract (README,
"Prometheus"); a figure that is not measured has no sample rather than a made-up value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from perftop.errors import PerftopError, UsageError
from perftop.fleet.link import parse_addr
from perftop.model import Snapshot
from perftop.model.steps import STEP_BUCKETS

RANK = ("host", "rank")
PROC = ("host", "rank", "role", "worker", "pid")


def _s(x: object) -> str:
    return "" if x is None else str(x)


class SnapshotMetrics:
    """A prometheus_client collector over the latest snapshot; ``update`` from any thread."""

    def __init__(self) -> None:
        self.snap: Snapshot | None = None

    def update(self, snap: Snapshot) -> None:
        self.snap = snap  # one reference swap: scrapes see a whole snapshot

    def describe(self) -> list[Any]:
        return []  # unchecked collector: families depend on the job

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        snap = self.snap
        if snap is None:
            return
        local = snap.meta.host
        steps = CounterMetricFamily("perftop_steps", "Training steps completed", labels=RANK)
        hist = HistogramMetricFamily(
            "perftop_step_seconds", "Training step duration (whole run)", labels=RANK
        )
        wait = GaugeMetricFamily(
            "perftop_data_wait_ratio",
            "Share of step time spent waiting for data (recent steps)",
            labels=RANK,
        )
        for r in snap.ranks:
            lab = [r.host or local, _s(r.rank)]
            steps.add_metric(lab, r.count)
            if r.step_hist:
                acc, buckets = 0, []
                for bound, n in zip((*STEP_BUCKETS, float("inf")), r.step_hist):
                    acc += n
                    buckets.append(("+Inf" if bound == float("inf") else repr(bound), acc))
                hist.add_metric(lab, buckets, r.step_sum_s)
            if r.data_wait_fraction is not None:
                wait.add_metric(lab, r.data_wait_fraction)
        yield from (steps, hist, wait)

        between = CounterMetricFamily(
            "perftop_between_steps_seconds",
            "Time spent outside training steps, by kind (eval, checkpoint, other)",
            labels=("host", "kind"),
        )
        for b in snap.between:
            between.add_metric([getattr(b, "host", "") or local, b.kind], b.total_s)
        yield between

        cpu = GaugeMetricFamily("perftop_process_cpu_percent", "Process CPU %", labels=PROC)
        uss = GaugeMetricFamily("perftop_process_uss_bytes", "Process unique memory", labels=PROC)
        for p in snap.processes:
            role = snap.role_of(p.pid, p.host)
            lab = [
                p.host or local,
                _s(role.rank if role else None),
                role.role if role else "other",
                _s(role.worker_id if role else None),
                str(p.pid),
            ]
            if p.alive and p.cpu_percent is not None:
                cpu.add_metric(lab, p.cpu_percent)
            if p.alive and p.uss_bytes is not None:
                uss.add_metric(lab, p.uss_bytes)
        yield from (cpu, uss)

        gpu = GaugeMetricFamily(
            "perftop_gpu_utilization_percent",
            "NVML GPU utilization (time a kernel ran)",
            labels=("host", "gpu"),
        )
        for g in snap.gpus:
            if g.util_percent is not None:
                gpu.add_metric([g.host or local, str(g.index)], g.util_percent)
        yield gpu

        syncs: dict[tuple[str, str, str], int] = {}
        for s in snap.sync:
            key = (s.host or local, s.op, f"{os.path.basename(s.file)}:{s.line}")
            syncs[key] = syncs.get(key, 0) + s.count
        sync = CounterMetricFamily(
            "perftop_sync_events",
            "Host-device sync events seen, by op and line of user code",
            labels=("host", "op", "site"),
        )
        for key, n in syncs.items():
            sync.add_metric(list(key), n)
        yield sync

        hints = GaugeMetricFamily(
            "perftop_hint_active", "1 while a bottleneck hint is active", labels=("host", "id")
        )
        for h in {(getattr(h, "host", "") or local, h.id) for h in snap.hints}:
            hints.add_metric(list(h), 1)
        yield hints


class MetricsServer:
    """The HTTP endpoint (``/metrics``) on its own daemon thread."""

    def __init__(self, spec: str) -> None:
        try:
            from prometheus_client import start_http_server
            from prometheus_client.registry import CollectorRegistry
        except ImportError:
            raise PerftopError(
                "--prometheus needs the prometheus_client package (pip install prometheus-client)"
            ) from None
        host, port = parse_addr(spec)
        self.metrics = SnapshotMetrics()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.metrics)  # type: ignore[arg-type]
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
        self._server.shutdown()
        self._server.server_close()
