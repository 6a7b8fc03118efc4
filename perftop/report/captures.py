"""The report's ``captures``: each on-demand op capture, one entry per process that
answered (or the monitor's own refusal), with its ops summary and trace (JSON and text)."""

from __future__ import annotations

from typing import Any

from perftop.events.capture import PHASES
from perftop.fmt import seconds
from perftop.model import Snapshot
from perftop.model.capture import Capture, CapturePart
from perftop.model.capture_words import cost_words, part_status

TEXT_OPS = 3  # ops per phase in the text report


def _r(x: float | None, nd: int = 9) -> float | None:
    return None if x is None else round(x, nd)


def _part(c: Capture, p: CapturePart) -> dict[str, Any]:
    return {
        "id": c.capture_id,
        "by": c.by,
        "asked_t": c.t,
        "pid": p.pid,
        "state": p.state,
        "reason": p.reason,
        "status": part_status(p, c.steps),
        "first_step": p.first_step if p.first_step >= 0 else None,
        "steps": p.steps or c.steps,
        "step_s": _r(p.step_s),
        "before_s": _r(p.before_s),
        "before_steps": p.before_n,
        "cost": _r(p.cost_s),
        "cost_error_s": _r(p.cost_err_s),
        "after_s": _r(p.after_s),
        "after_steps": p.after_n,
        "phase_s": {k: _r(v) for k, v in p.phase_s.items()},
        "ops": [
            {
                "name": op.name,
                "phase": op.phase,
                "calls_per_step": op.calls,
                "self_s": _r(op.self_s),
                "device_s": _r(op.device_s),
                "share": _r(op.share, 4),
                "shapes": op.shapes,
                "file": op.file,
                "line": op.line,
                "function": op.function,
            }
            for op in p.ops
        ],
        "more_ops": p.more_ops,
        "device": {
            phase: {"kernel_s": _r(k), "memcpy_s": _r(m), "idle_s": _r(i)}
            for phase, (k, m, i) in p.device.items()
        },
        "trace": p.trace,
        "clock_offset_us": p.clock_offset_us,
    }


def captures_json(snap: Snapshot) -> list[dict[str, Any]]:
    return [_part(c, p) for c in snap.captures for p in c.shown_parts()]


def capture_lines(r: dict[str, Any]) -> list[str]:
    """The text report's section (empty without captures)."""
    caps = r.get("captures") or []
    if not caps:
        return []
    out = ["", "Op captures (self time per step, top ops of each phase)"]
    for c in caps:
        head = f"  {c['id']}" + (f" ({c['by']})" if c["by"] else "")
        head += f" pid {c['pid']}: {c['status']}" if c["pid"] else f": {c['status']}"
        if c["state"] == "done":
            head += ", " + cost_words(
                c["cost"],
                c["before_s"],
                c.get("before_steps", 0),
                c.get("after_s") or 0.0,
                c.get("after_steps", 0),
                c.get("cost_error_s"),
            )
        out.append(head)
        for phase in PHASES:
            ops = [op for op in c["ops"] if op["phase"] == phase][:TEXT_OPS]
            if not ops:
                continue
            took = seconds(c["phase_s"].get(phase))
            shown = ", ".join(
                f"{op['name']} {seconds(op['self_s'])}"
                + (f" {op['share']:.0%}" if op["share"] is not None else "")
                for op in ops
            )
            out.append(f"    {phase:<9} {took:>8}  {shown}")
        if c["trace"]:
            out.append(f"    trace: {c['trace']}  (open in ui.perfetto.dev)")
    return out
