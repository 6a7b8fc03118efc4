"""``between-steps``: evaluation, checkpointing, rollouts or other work outside training
steps takes a large share of the run's wall time (``Snapshot.between``, filled by the step
tracker). Passes that forward calls opened name the user's function that made them and the
share of their time inside the model's forward calls; a rollout's advice is about that
function, never "evaluate less often"."""

from __future__ import annotations

from perftop.fmt import count
from perftop.hints.base import fraction, seconds, threshold
from perftop.model.between import OVERLAPPED, pass_text, row_dict
from perftop.model.snapshot import BetweenRow, Hint, Snapshot

ENTER, STAY = 0.20, 0.15  # share of the run's wall time
MIN_S = 5.0

ADVICE = {
    "eval": "Evaluate less often or on a subset, under torch.inference_mode(), with a "
    "larger batch than training.",
    "checkpoint": "Save less often, to local disk, or asynchronously "
    "(torch.distributed.checkpoint.async_save).",
    "report": "Ray Train's report waits for every worker, for the upload of a checkpoint "
    "it carries and for its controller to take the last result (its poll: up to 2 s): "
    "report less often (every N steps or epochs, not every batch), and upload checkpoints "
    "asynchronously (checkpoint_upload_mode=ASYNC).",
    "rollout": "Rollouts are forward calls alternating with an environment's "
    "steps, made from {site}: that function is where the time goes. Speed up what it "
    "spends most in (the share inside the model's forward calls is in the evidence): the "
    "environment (several environments stepped at once, in subprocesses), or the policy's "
    "forward calls (a batch of observations per call, torch.inference_mode()).",
}
NAMES = {
    "eval": "evaluation",
    "checkpoint": "checkpointing",
    "rollout": "rollouts",
    "report": "Ray Train's reports",
}


def _advice(b: BetweenRow) -> str:
    return ADVICE[b.kind].format(site=b.site or "the loop")


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
        + (f": {pass_text(row_dict(b), b.kind)}" if b.site else "")
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
