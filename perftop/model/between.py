"""Time outside training steps (``Between`` events): totals by kind for the process whose
steps the snapshot shows (the primary rank), so a multi-rank job's evaluation counts once."""

from __future__ import annotations

from typing import Any

from perftop.events import Between
from perftop.model.snapshot import BetweenRow

KIND_ORDER = ("eval", "checkpoint", "other", "checkpoint_overlapped")
# A torch.save on another thread than training's: it overlaps steps, it is not time
# outside them (the hint and the time-between figures leave it out).
OVERLAPPED = "checkpoint_overlapped"


class BetweenReducer:
    handles = (Between,)

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, BetweenRow]] = {}

    def apply(self, ev: Any) -> None:
        rows = self.rows.setdefault(ev.pid, {})
        r = rows.get(ev.kind) or BetweenRow(ev.kind)
        rows[ev.kind] = BetweenRow(
            ev.kind, r.total_s + ev.length, r.count + 1, ev.t0, ev.t0 + ev.length
        )

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        steps = parts.get("steps")
        pid = steps.pid if steps is not None else None
        if pid not in self.rows:  # no steps yet: the first process that had such time
            pid = next(iter(self.rows), None)
        rows = self.rows.get(pid, {}) if pid is not None else {}
        parts["between"] = tuple(sorted(rows.values(), key=_order))


def _order(r: BetweenRow) -> tuple[int, str]:
    return (KIND_ORDER.index(r.kind) if r.kind in KIND_ORDER else len(KIND_ORDER), r.kind)
