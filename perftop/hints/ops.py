"""``phase-top-ops``: once a capture exists, the phase that takes most of the captured steps
linked to the ops that make it slow ("top ops in the capture at step N: aten::addmm 62%").

It fires for forward, backward or the optimizer taking at least ``PHASE_SHARE`` of the
captured step, with its top op at least ``TOP_OP_SHARE`` of that phase: one op to look at
first. The figures are the capture's own (measured over its steps); the hint names them.
"""

from __future__ import annotations

from perftop.fmt import fraction, seconds, step_no
from perftop.model.capture import CaptureOp, CapturePart
from perftop.model.capture_words import steps_text
from perftop.model.snapshot import Hint, Snapshot

PHASE_SHARE, PHASE_SHARE_STAY = 0.40, 0.35
TOP_OP_SHARE = 0.25
COMPUTE = ("forward", "backward", "optimizer")
MATMUL = ("addmm", "mm", "bmm", "matmul", "linear", "conv", "baddbmm", "_scaled_dot_product")
TOP = 3


def latest_done(snap: Snapshot) -> CapturePart | None:
    """The newest finished capture's summary (None before any)."""
    return next((c.done() for c in reversed(snap.captures) if c.done() is not None), None)


def top_ops_text(part: CapturePart, phase: str, n: int = TOP) -> str:
    """``top ops in the capture at step 41: aten::addmm 62%, aten::gelu 11%``."""
    ops = sorted((op for op in part.ops if op.phase == phase), key=lambda op: -op.self_s)[:n]
    shown = ", ".join(
        f"{op.name} {fraction(op.share)}" if op.share is not None else op.name for op in ops
    )
    return f"top {phase} ops in the capture at step {step_no(part.first_step)}: {shown}"


def _advice(phase: str, top: CaptureOp) -> tuple[str, ...]:
    where = f" (called from {top.where})" if top.where else ""
    first = f"Look at {top.name} first{where}: {fraction(top.share)} of {phase}."
    if phase == "optimizer":
        return (first, "torch.optim's fused=True (CUDA) or foreach=True runs the update "
                "for all parameters in few kernels instead of one per parameter.")  # fmt: skip
    if any(k in top.name for k in MATMUL):
        return (first, "Matrix multiplies or convolutions dominate: mixed precision "
                "(torch.autocast with bfloat16) and TF32 make them faster on tensor cores; "
                "on a CPU, torch.set_num_threads and larger batches do.")  # fmt: skip
    return (first, "The trace beside the recording shows each call in its step "
            "(open it in ui.perfetto.dev).")  # fmt: skip


def phase_top_ops(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    part = latest_done(snap)
    if part is None or not part.step_s:
        return []
    bar = PHASE_SHARE_STAY if "phase-top-ops" in active else PHASE_SHARE
    phase = max(COMPUTE, key=lambda p: part.phase_s.get(p, 0.0))
    took = part.phase_s.get(phase, 0.0)
    share = took / part.step_s
    ops = [op for op in part.ops if op.phase == phase]
    if share < bar or not ops:
        return []
    top = max(ops, key=lambda op: op.self_s)
    if top.share is None or top.share < TOP_OP_SHARE:
        return []
    return [
        Hint(
            id="phase-top-ops",
            severity="info",
            title=f"{phase} takes {fraction(share)} of the step, {top.name} most of it",
            evidence=(
                f"{phase} {seconds(took)} of a {seconds(part.step_s)} step "
                f"({steps_text(part.first_step, part.steps)}, pid {part.pid})",
                top_ops_text(part, phase),
            ),
            advice=_advice(phase, top),
            est_gain=None,
            est_gain_text=f"at most {fraction(top.share * share)} of step time ({top.name})",
            panel="ops",
        )
    ]
