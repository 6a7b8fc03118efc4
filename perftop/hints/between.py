"""``between-steps``: evaluation, checkpointing or other work outside training steps takes
a large share of the run's wall time (``Snapshot.between``, filled by the step tracker)."""

from __future__ import annotations

from perftop.hints.base import count, fraction, seconds, threshold
from perftop.model.between import OVERLAPPED, pass_text, row_dict
from perftop.model.snapshot import BetweenRow, Hint, Snapshot

ENTER, STAY = 0.20, 0.15  # share of the run's wall time
MIN_S = 5.0

ADVICE = {
    "eval": "Evaluate less often or on a subset, under torch.inference_mode(), with a "
    "larger batch than training.",
    "checkpoint": "Save less often, to local disk, or asynchronously "
    "(torch.distributed.checkpoint.async_save).",
}
NAMES = {"eval": "evaluation", "checkpoint": "checkpointing"}
# Passes that forward calls with grad off opened, with no DataLoader: an evaluation
# (nanoGPT's estimate_loss) and an RL rollout (SB3's collect_rollouts) look the same to
# the hook, so the advice names the function and does not guess which it is.
SITE_ADVICE = (
    "Most of it is forward calls with grad off and no DataLoader, made from {site}: if that "
    "function evaluates the model, run it less often or on fewer batches, under "
    "torch.inference_mode(); if it is the loop's own work (an RL rollout's environment "
    "steps, sampling), that function is where the time goes: speed up the work between its "
    "forward calls (the environment: step several at once), or the forward calls themselves."
)


def _advice(b: BetweenRow) -> str:
    if b.kind == "eval" and b.site and b.site_s >= 0.5 * b.total_s:
        return SITE_ADVICE.format(site=b.site)
    return ADVICE[b.kind]


def between_steps(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    wall = snap.meta.elapsed_s
    rows = [b for b in snap.between if b.total_s > 0 and b.kind != OVERLAPPED]
    total = sum(b.total_s for b in rows)
    if not wall or total < MIN_S:
        return []
    share = min(1.0, total / wall)
    if share < threshold("between-steps", active, ENTER, STAY):
        return []
    rows.sort(key=lambda b: -b.total_s)
    ev = [
        f"{NAMES.get(b.kind, b.kind)}: {seconds(b.total_s)} in {count(b.count, 'interval')} "
        f"({fraction(b.total_s / wall)} of the run)"
        + (f": {pass_text(row_dict(b))}" if b.site else "")
        for b in rows
    ]
    advice = [_advice(b) for b in rows if b.kind in ADVICE]
    advice.append("Time outside steps is not training: the Steps panel's rate leaves it out.")
    top = NAMES.get(rows[0].kind, rows[0].kind)
    return [
        Hint(
            id="between-steps",
            severity="high" if share >= 0.4 else "medium",
            title=f"Between steps: {fraction(share)} of the run is spent outside training steps"
            f" (mostly {top})",
            evidence=tuple(ev),
            advice=tuple(advice),
            est_gain=round(share, 4),
            est_gain_text=f"up to {fraction(share)} of wall time",
            panel="steps",
        )
    ]
