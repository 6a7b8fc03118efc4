"""The collectives' metric families (:mod:`perftop.model.comm`): per rank, the exposed and
overlapped wait at collectives and the collectives counted by process group and op; the
straggler by who arrives last; hung collectives. No sample where nothing was measured."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from perftop.model import Snapshot

RANK = ("host", "rank")


def _s(x: object) -> str:
    return "" if x is None else str(x)


def comm_families(snap: Snapshot) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    local = snap.meta.host
    wait = GaugeMetricFamily(
        "perftop_comm_wait_seconds",
        "Median time per step the training thread waited at collectives (exposed)",
        labels=RANK,
    )
    overlap = GaugeMetricFamily(
        "perftop_comm_overlap_seconds",
        "Median waiting per step at collectives that overlapped the rank's own work",
        labels=RANK,
    )
    share = GaugeMetricFamily(
        "perftop_comm_exposed_ratio", "Exposed wait at collectives over the step", labels=RANK
    )
    count = CounterMetricFamily(
        "perftop_collectives", "Collectives entered (c10d flight recorder)",
        labels=(*RANK, "pg", "op"),
    )  # fmt: skip
    nbytes = CounterMetricFamily(
        "perftop_collective_bytes", "Input bytes of the collectives entered",
        labels=(*RANK, "pg", "op"),
    )  # fmt: skip
    for r in snap.comm.ranks:
        lab = [r.host or local, _s(r.rank)]
        if r.wait_s is not None:
            wait.add_metric(lab, r.wait_s)
        if r.overlap_s is not None:
            overlap.add_metric(lab, r.overlap_s)
        if r.exposed_share is not None:
            share.add_metric(lab, r.exposed_share)
        for c in r.collectives:
            count.add_metric([*lab, c.pg, c.op], c.count)
            nbytes.add_metric([*lab, c.pg, c.op], c.bytes)
    strag = GaugeMetricFamily(
        "perftop_comm_straggler_wait_seconds",
        "How long a step the other ranks wait for the rank that arrives last (the straggler)",
        labels=RANK,
    )
    s = snap.comm.straggler
    if s is not None:
        strag.add_metric([s.host or local, _s(s.rank)], s.wait_s)
    hangs = GaugeMetricFamily(
        "perftop_comm_hangs", "Collectives hung now (kind: hang or desync)", labels=("kind",)
    )
    if snap.comm.ranks:
        for kind in ("hang", "desync"):
            n = sum(1 for h in snap.comm.hangs if h.ongoing and (kind == "desync") == h.desync)
            hangs.add_metric([kind], n)
    yield from (wait, overlap, share, count, nbytes, strag, hangs)
