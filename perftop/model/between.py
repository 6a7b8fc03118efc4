"""Time outside training steps (``Between`` events): totals by kind for the process whose
steps the snapshot shows (the primary rank), so a multi-rank job's evaluation counts once."""

from __future__ import annotations

from typing import Any

from perftop.events import Between, BetweenOpen
from perftop.model.snapshot import BetweenRow

KIND_ORDER = ("eval", "checkpoint", "other", "checkpoint_overlapped")
# A torch.save on another thread than training's: it overlaps steps, it is not time
# outside them (the hint and the time-between figures leave it out).
OVERLAPPED = "checkpoint_overlapped"


class BetweenReducer:
    handles = (Between, BetweenOpen)

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, BetweenRow]] = {}
        # each process's latest interval: (kind, t0, t1), t1 None while it runs
        self.latest: dict[int, tuple[str, float, float | None]] = {}

    def apply(self, ev: Any) -> None:
        if isinstance(ev, BetweenOpen):
            self.latest[ev.pid] = (ev.kind, ev.t0, None)
            return
        last, end = self.latest.get(ev.pid), ev.t0 + ev.length
        if ev.kind == OVERLAPPED:  # a save on another thread: the steps went on
            pass
        elif last is not None and last[1] - 1e-6 <= ev.t0 and (last[2] is None or ev.t0 <= last[2]):
            # the latest interval's end (an eval and a checkpoint in one come as two)
            self.latest[ev.pid] = (last[0], last[1], max(end, last[2] or end))
        elif last is None or ev.t0 > last[1]:  # one whose start was not seen
            self.latest[ev.pid] = (ev.kind, ev.t0, end)
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
        parts["between_latest"] = tuple((p, *v) for p, v in self.latest.items())


def _order(r: BetweenRow) -> tuple[int, str]:
    return (KIND_ORDER.index(r.kind) if r.kind in KIND_ORDER else len(KIND_ORDER), r.kind)
