"""The metric families a scrape returns, built from one snapshot and the endpoint's state.

The nine original names keep their meaning (README, "Prometheus"); conventional units sit
beside them (``_seconds_total``, ``_ratio`` in 0..1, ``_bytes``). A figure that is not
measured has no sample rather than a made-up value.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any

from perftop.fleet.metrics_comm import comm_families
from perftop.fleet.metrics_state import MetricsState
from perftop.fmt_sync import sync_where
from perftop.model import Snapshot
from perftop.model.steps import STEP_BUCKETS

RANK = ("host", "rank")
PROC = ("host", "rank", "role", "worker")
PHASE_LABELS = {"data": "data", "forward/other": "forward", "backward": "backward",
                "optimizer": "optimizer"}  # fmt: skip


def _s(x: object) -> str:
    return "" if x is None else str(x)


def _job_state(snap: Snapshot) -> tuple[str, str]:
    m = snap.meta
    if m.exit_code is not None:
        return "exited", str(m.exit_code)
    if m.ended:
        return "ended", ""
    return ("running" if m.job_pid is not None else "starting"), ""


def families(snap: Snapshot, state: MetricsState) -> Iterator[Any]:
    yield from _steps(snap)
    yield from _processes(snap, state)
    yield from _machine(snap)
    yield from _job(snap, state)
    yield from comm_families(snap)


def _steps(snap: Snapshot) -> Iterator[Any]:
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

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
    phase = GaugeMetricFamily(
        "perftop_step_phase_seconds",
        "Median time per step in each phase (data, forward, backward, optimizer; recent steps)",
        labels=(*RANK, "phase"),
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
        for name, label in PHASE_LABELS.items():
            if name in r.phase_p50:
                phase.add_metric([*lab, label], r.phase_p50[name])
    yield from (steps, hist, wait, phase)

    between = CounterMetricFamily(
        "perftop_between_steps_seconds",
        "Time spent outside training steps, by kind (eval, checkpoint, other)",
        labels=("host", "kind"),
    )
    for b in snap.between:
        between.add_metric([b.host or local, b.kind], b.total_s)
    yield between

    syncs: dict[tuple[str, str, str], int] = {}
    for s in snap.sync:
        # named as the report and the screen name it: a library's own line from its
        # package's folder (two packages' ``__init__.py:448`` are two sites)
        key = (
            s.host or local,
            s.op,
            sync_where(s.file, s.line, s.lib_file, s.lib_line, s.package)[0],
        )
        syncs[key] = syncs.get(key, 0) + s.count
    sync = CounterMetricFamily(
        "perftop_sync_events",
        "Host-device sync events seen, by op and line of user code",
        labels=("host", "op", "site"),
    )
    for key, n in syncs.items():
        sync.add_metric(list(key), n)
    yield sync


def _processes(snap: Snapshot, state: MetricsState) -> Iterator[Any]:
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        InfoMetricFamily,
    )

    local = snap.meta.host
    rows = {(p.host or local, p.pid): p for p in snap.processes if p.alive}
    sums: dict[str, dict[tuple[str, ...], float]] = {"cpu": {}, "uss": {}, "rss": {}}
    info = InfoMetricFamily(
        "perftop_process",
        "A live process of the job: its pid under its stable labels",
        labels=(*PROC, "pid"),
    )
    for pk in state.procs:
        p = rows.get((pk.host, pk.pid))
        if p is None:
            continue
        info.add_metric([*pk.key, str(pk.pid)], {})
        for name, v in (("cpu", p.cpu_percent), ("uss", p.uss_bytes), ("rss", p.rss_bytes)):
            if v is not None:  # processes that share labels (`other`s) are summed
                sums[name][pk.key] = sums[name].get(pk.key, 0.0) + v
    cpu = GaugeMetricFamily(
        "perftop_process_cpu_percent",
        "Process CPU % (deprecated: rate(perftop_process_cpu_seconds_total))",
        labels=PROC,
    )
    uss = GaugeMetricFamily("perftop_process_uss_bytes", "Process unique memory", labels=PROC)
    rss = GaugeMetricFamily("perftop_process_rss_bytes", "Process resident memory", labels=PROC)
    for fam, name in ((cpu, "cpu"), (uss, "uss"), (rss, "rss")):
        for key, v in sums[name].items():
            fam.add_metric(list(key), v)
    secs = CounterMetricFamily(
        "perftop_process_cpu_seconds",
        "User and system CPU time of the processes under these labels, across their lives",
        labels=PROC,
    )
    for ckey, v in state.cpu.totals().items():
        secs.add_metric(list(ckey), round(v, 3))  # type: ignore[call-overload]
    batches = CounterMetricFamily(
        "perftop_dataloader_batches",
        "Batches DataLoader workers produced, per worker index, across epochs",
        labels=("host", "rank", "worker"),
    )
    for bkey, v in state.batches.totals().items():
        batches.add_metric(list(bkey), v)  # type: ignore[call-overload]
    yield from (info, cpu, uss, rss, secs, batches)


def _machine(snap: Snapshot) -> Iterator[Any]:
    from prometheus_client.core import GaugeMetricFamily

    local = snap.meta.host
    gpu = GaugeMetricFamily(
        "perftop_gpu_utilization_percent",
        "NVML GPU utilization % (deprecated: perftop_gpu_utilization_ratio)",
        labels=("host", "gpu"),
    )
    ratio = GaugeMetricFamily(
        "perftop_gpu_utilization_ratio",
        "NVML GPU utilization, 0-1: share of time a kernel ran",
        labels=("host", "gpu"),
    )
    used = GaugeMetricFamily(
        "perftop_gpu_memory_used_bytes", "GPU memory in use", labels=("host", "gpu")
    )
    total = GaugeMetricFamily(
        "perftop_gpu_memory_total_bytes", "GPU memory in all", labels=("host", "gpu")
    )
    for g in snap.gpus:
        lab = [g.host or local, str(g.index)]
        if g.util_percent is not None:
            gpu.add_metric(lab, g.util_percent)
            ratio.add_metric(lab, g.util_percent / 100.0)
        if g.mem_used_bytes is not None:
            used.add_metric(lab, g.mem_used_bytes)
        if g.mem_total_bytes is not None:
            total.add_metric(lab, g.mem_total_bytes)
    yield from (gpu, ratio, used, total)

    h = snap.host
    cpu = GaugeMetricFamily(
        "perftop_host_cpu_ratio", "Host CPU use, 0-1 of all cores", labels=("host",)
    )
    mem = GaugeMetricFamily(
        "perftop_host_memory_used_bytes", "Host memory in use", labels=("host",)
    )
    mem_total = GaugeMetricFamily(
        "perftop_host_memory_total_bytes", "Host memory in all", labels=("host",)
    )
    if h.cpu_percent is not None:
        cpu.add_metric([local], h.cpu_percent / 100.0)
    if h.mem_used_bytes is not None:
        mem.add_metric([local], h.mem_used_bytes)
    if h.mem_total_bytes is not None:
        mem_total.add_metric([local], h.mem_total_bytes)
    yield from (cpu, mem, mem_total)


def _job(snap: Snapshot, state: MetricsState) -> Iterator[Any]:
    from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

    local = snap.meta.host
    job = InfoMetricFamily(
        "perftop_job",
        "The job: its command, state (starting, running, exited, ended) and exit code",
        labels=("host", "command", "state", "exit_code"),
    )
    if snap.meta.command and not snap.nodes:
        st, code = _job_state(snap)
        job.add_metric([local, shlex.join(snap.meta.command)[:200], st, code], {})
    for node in snap.nodes:  # a collector: each node's job as its node reports it
        m = re.fullmatch(r"(\w+)(?: \((-?\d+)\))?.*", node.state or "")
        if m:
            job.add_metric([node.name, "", m[1], m[2] or ""], {})
    yield job

    hints = GaugeMetricFamily(
        "perftop_hint_active",
        "1 while a bottleneck hint is active, 0 once it cleared",
        labels=("host", "id"),
    )
    active = {(h.host or local, h.id) for h in snap.hints}
    for key in sorted(state.hints_seen | active):
        hints.add_metric(list(key), 1 if key in active else 0)
    yield hints
