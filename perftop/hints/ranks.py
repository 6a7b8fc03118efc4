"""Several ranks or GPUs: ``straggler`` (one rank consistently slower, so every other
waits for it at each gradient exchange) and ``gpu-imbalance`` (one GPU much less busy).

Written against ``Snapshot.ranks`` (one ``StepStats`` per training process) and
``Snapshot.gpus``; the engine's persistence makes "consistently" mean held for a while.
"""

from __future__ import annotations

from perftop.hints.base import MIN_STEPS, fraction, seconds, threshold
from perftop.model.snapshot import Hint, Snapshot, StepStats
from perftop.model.stats import median

SLOWER, SLOWER_STAY = 1.15, 1.08  # the slowest rank's work against the others' median
GPU_GAP, GPU_GAP_STAY = 30.0, 20.0  # utilization points between the busiest and the idlest


def _work(r: StepStats) -> float | None:
    """A rank's own work per step: step time less its data wait and backward (with DDP
    the backward includes waiting for the other ranks at the all-reduce)."""
    if r.p50 is None:
        return None
    ph = r.phase_p50
    return max(0.0, r.p50 - ph.get("data", 0.0) - ph.get("backward", 0.0)) or r.p50


def straggler(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    ranks = [r for r in snap.ranks if r.count >= MIN_STEPS and _work(r) is not None]
    if len(ranks) < 2:
        return []
    slow = max(ranks, key=lambda r: _work(r) or 0.0)
    others = median([_work(r) or 0.0 for r in ranks if r is not slow]) or 0.0
    w = _work(slow) or 0.0
    if others <= 0 or w < threshold("straggler", active, SLOWER, SLOWER_STAY) * others:
        return []
    name = f"rank {slow.rank}" if slow.rank is not None else f"pid {slow.pid}"
    ev = [
        f"{name} spends {seconds(w)} a step outside data wait and backward; "
        f"the other {len(ranks) - 1} ranks {seconds(others)} (median)",
    ]
    if slow.data_wait_fraction is not None:
        ev.append(f"{name} waits for data {fraction(slow.data_wait_fraction)} of its steps")
    share = (w - others) / slow.p50 if slow.p50 else None
    return [
        Hint(
            id="straggler",
            severity="medium",
            title=f"Straggler: {name} is {w / others:.2f}x slower than the others",
            evidence=tuple(ev),
            advice=(
                f"Look at {name}'s host and GPU: other jobs on it, thermal throttling, "
                "a slower device, or more data to load.",
                "Uneven batches (variable-length samples): bucket by length so ranks get "
                "equal work.",
            ),
            est_gain=round(share, 4) if share is not None else None,
            est_gain_text=(
                f"up to {fraction(share)} of step time, what the other ranks wait"
                if share is not None
                else ""
            ),
            panel="steps",
        )
    ]


def gpu_imbalance(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    rows = [g for g in snap.gpus if g.util_percent is not None]
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
