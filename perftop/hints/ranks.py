"""Several ranks or GPUs: ``straggler`` (one rank consistently slower, so every other
waits for it at each gradient exchange) and ``gpu-imbalance`` (one GPU much less busy).

Written against ``Snapshot.ranks`` (one ``StepStats`` per training process) and
``Snapshot.gpus``; the engine's persistence makes "consistently" mean held for a while.
"""

from __future__ import annotations

from perftop.hints.base import fraction, job_gpus, seconds, threshold
from perftop.model.ranks import MIN_SHARE, find_straggler
from perftop.model.snapshot import Hint, Snapshot

GPU_GAP, GPU_GAP_STAY = 30.0, 20.0  # utilization points between the busiest and the idlest
STAY_SHARE = 0.07  # a straggler already shown stays while its extra work is this share


def straggler(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    """The rank :func:`perftop.model.ranks.find_straggler` names (the ranks table and the
    report mark the same one), with its evidence."""
    s = find_straggler(snap.ranks, STAY_SHARE if "straggler" in active else MIN_SHARE)
    if s is None:
        return _by_arrival(snap)
    label = snap.rank_label(s.rank, s.pid, s.host)
    advice = (
        f"Look at {label}: other jobs on its host, thermal throttling, a slower "
        "device, or more data to load (its data wait is in the Ranks table).",
        "Uneven batches (variable-length samples): bucket by length so ranks get equal work.",
    )
    return _straggler(label, s.wait_s, s.step_s, s.evidence(label), advice)


def _straggler(
    label: str, wait_s: float, step_s: float, evidence: tuple[str, ...], advice: tuple[str, ...]
) -> list[Hint]:
    """The one ``straggler`` hint, whichever rule named the rank."""
    share = wait_s / step_s if step_s > 0 else None
    return [
        Hint(
            id="straggler",
            severity="medium",
            title=f"Straggler: {label} makes the other ranks wait {seconds(wait_s)} a step",
            evidence=evidence,
            advice=advice,
            est_gain=round(share, 4) if share is not None else None,
            est_gain_text=(
                f"up to {fraction(share)} of step time, what the other ranks wait"
                if share is not None
                else ""
            ),
            panel="ranks",
        )
    ]


def _by_arrival(snap: Snapshot) -> list[Hint]:
    """The straggler by who arrives last at the collectives (:mod:`perftop.model.comm`):
    a rank starved of CPU or slow at its loader, whose own-work figures need not show it."""
    c = snap.comm.straggler
    if c is None:
        return []
    label = snap.rank_label(c.rank, c.pid, c.host)
    evidence = (
        f"{label} arrived last at {fraction(c.last_share)} of the collectives every "
        f"rank entered (c10d's flight recorder); {fraction(c.wait_share)} of the ranks' "
        "exposed wait at them was for it",
        f"the other ranks wait {seconds(c.wait_s)} a step for it (median) of a "
        f"{seconds(c.step_s)} step",
    )
    advice = (
        f"Look at {label}: other jobs on its host (CPU starvation, niceness), a "
        "slower device, or more data to load (its data wait is in the Ranks table).",
    )
    return _straggler(label, c.wait_s, c.step_s, evidence, advice)


def gpu_imbalance(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    rows = [g for g in job_gpus(snap) if g.util_percent is not None]
    if len(rows) < 2:
        return []
    lo = min(rows, key=lambda g: g.util_percent or 0.0)
    hi = max(rows, key=lambda g: g.util_percent or 0.0)
    gap = (hi.util_percent or 0.0) - (lo.util_percent or 0.0)
    if gap < threshold("gpu-imbalance", active, GPU_GAP, GPU_GAP_STAY):
        return []
    return [
        Hint(
            id="gpu-imbalance",
            severity="medium",
            title=f"GPU imbalance: GPU {lo.index} is busy {lo.util_percent:.0f}%, "
            f"GPU {hi.index} {hi.util_percent:.0f}%",
            evidence=tuple(
                f"GPU {g.index}: busy {g.util_percent:.0f}% (NVML)"
                for g in sorted(rows, key=lambda g: g.index)
            ),
            advice=(
                "nn.DataParallel does the loss and gradient gathering on GPU 0: "
                "DistributedDataParallel balances the work.",
                "A rank that waits for data leaves its GPU idle: see the ranks' data wait.",
            ),
            est_gain=round(gap / 100.0, 4),
            est_gain_text=f"up to {gap:.0f}% of the idle GPU's time",
            panel="gpu",
        )
    ]
