"""The input pipeline: ``input-bound`` (the loop waits for batches), its evidence and the
gain of its advice; the advice, which follows the evidence, is in
:mod:`perftop.hints.inputs_advice`; ``io-bound`` (the workers wait for storage) in
:mod:`perftop.hints.storage`."""

from __future__ import annotations

from perftop.hints.base import Loop, fraction, job_gpus, loop, seconds, threshold
from perftop.hints.inputs_advice import advice as worker_advice
from perftop.hints.restarts import Restarts, restarts
from perftop.model.snapshot import Hint, Snapshot

INPUT_ENTER, INPUT_STAY = 0.30, 0.20  # data wait, share of step time
GPU_BUSY = 90.0  # a GPU this busy is the bottleneck whatever the loop waits for


def input_bound(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    if snap.steps.data_wait_source == "before_forward":
        # Behind a feeder the figure is the training thread's time off the CPU before its
        # forwards: it also holds the loop's own blocking work there (a sleep, a blocking
        # write), so it cannot say that the loop waits for data (wait-before-forward says
        # what was measured: hints/feeder.py).
        return []
    got = waiting_loop(snap, active, "input-bound")
    if got is None:
        return []
    lp, gpu = got
    share = lp.data_share
    ev = [
        f"data wait is {fraction(share)} of step time: {seconds(lp.data_s)} of a "
        f"{seconds(lp.step_s)} step on average, over the last {lp.n} steps"
    ]
    if gpu is not None:
        ev.append(f"the GPU is busy {gpu:.0f}% of the time (NVML)")
    rs = restarts(lp, snap.loaders)
    advice, workers = worker_advice(snap, lp, ev, rs)
    gain, gain_txt = _gain(lp, workers) if rs is None else _restart_gain(lp, rs)
    return [
        Hint(
            id="input-bound",
            severity="high" if share >= 0.5 else "medium",
            title=f"Input-bound: the loop waits for data {fraction(share)} of each step",
            evidence=tuple(ev),
            advice=tuple(advice),
            est_gain=gain,
            est_gain_text=gain_txt,
            panel="steps",
        )
    ]


def _gain(lp: Loop, workers: int | None) -> tuple[float, str]:
    """What the advice gains, at most: with ``workers`` advised, a step takes at least the
    longer of the loop's own compute and the time the workers need per batch (one batch
    takes a worker as long as it took the loop, or a worker now, over ``workers`` of
    them). An upper bound: moving batches between processes costs more, untimed
    (benchmarks/hint_gains.py measures the real gain beside it). Without a setting to
    advise, the whole data wait."""
    share = lp.data_share
    if workers is None or lp.step_s <= 0:
        return round(share, 4), (
            f"up to {fraction(share)} of step time, if every batch were ready "
            "(no single setting gets there: see the advice)"
        )
    per_batch = lp.data_s if not lp.workers else (lp.batch_s or lp.data_s)
    new = max(lp.compute_s, per_batch / workers)
    gain = max(0.0, min(share, 1.0 - new / lp.step_s))
    limit = "the loop's own compute" if new <= lp.compute_s else "the workers' pace"
    return round(gain, 4), (
        f"up to {fraction(gain)} of step time with num_workers={workers}: a step would take "
        f"at least {seconds(new)}, set by {limit}; each batch's transfer from a worker "
        "process, and the workers' own CPU, cost more and are not timed apart (the data "
        f"wait is {fraction(share)})"
    )


def _restart_gain(lp: Loop, rs: Restarts) -> tuple[float, str]:
    """The waits after the workers' restarts, which persistent workers do not have."""
    gain = lp.data_share * rs.share
    return round(gain, 4), (
        f"up to {fraction(gain)} of step time with persistent_workers=True: the waits "
        "after the workers' restarts"
    )


def waiting_loop(
    snap: Snapshot, active: frozenset[str], hint_id: str
) -> tuple[Loop, float | None] | None:
    """The loop, and its busiest job GPU's utilization, where its data wait clears the bar
    (``INPUT_ENTER`` to raise ``hint_id``, ``INPUT_STAY`` to keep it) and no job GPU is
    ``GPU_BUSY`` (the GPU is then the bottleneck whatever the loop waits for); else None.
    Both hints on the data wait (this one, wait-before-forward) hold to it."""
    lp = loop(snap)
    if lp is None or lp.data_share < threshold(hint_id, active, INPUT_ENTER, INPUT_STAY):
        return None
    gpu = gpu_busy(snap)
    if gpu is not None and gpu >= GPU_BUSY:
        return None
    return lp, gpu


def gpu_busy(snap: Snapshot) -> float | None:
    """The busiest job GPU's utilization (NVML), or None where none is known."""
    vals = [g.util_percent for g in job_gpus(snap) if g.util_percent is not None]
    return max(vals) if vals else None
