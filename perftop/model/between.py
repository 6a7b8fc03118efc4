"""Time outside training steps (``Between`` events): totals by kind for the process whose
steps the snapshot shows (the primary rank), so a multi-rank job's evaluation counts once."""

from __future__ import annotations

from typing import Any

from perftop.events import Between, BetweenOpen
from perftop.model.finding_rows import passes_run
from perftop.model.snapshot import BetweenRow

KIND_ORDER = ("eval", "rollout", "checkpoint", "report", "other", "checkpoint_overlapped")
# A torch.save on another thread than training's: it overlaps steps, it is not time
# outside them (the hint and the time-between figures leave it out).
OVERLAPPED = "checkpoint_overlapped"
CHECKPOINT = "checkpoint"
MAX_SITES = 64  # sites kept per kind (strings from the job: bounded)


class BetweenReducer:
    handles = (Between, BetweenOpen)

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, BetweenRow]] = {}
        # each process's latest interval: (kind, t0, t1), t1 None while it runs
        self.latest: dict[int, tuple[str, float, float | None]] = {}
        # (pid, kind) -> {site: seconds}: the user's functions that opened passes
        self.sites: dict[tuple[int, str], dict[str, float]] = {}

    def apply(self, ev: Any) -> None:
        if isinstance(ev, BetweenOpen):
            self.latest[ev.pid] = (ev.kind, ev.t0, None)
            return
        last, end = self.latest.get(ev.pid), ev.t0 + ev.length
        if ev.kind == OVERLAPPED:  # a save on another thread: the steps went on
            pass
        elif last is not None and last[1] - 1e-6 <= ev.t0 and (last[2] is None or ev.t0 <= last[2]):
            # the latest interval's end (an eval and a checkpoint in one come as two): an
            # interval said to be an evaluation while it ran was what its end says it was
            # (a rollout's kind is known once its pass is seen stepping an environment)
            kind = ev.kind if last[2] is None and ev.kind != CHECKPOINT else last[0]
            self.latest[ev.pid] = (kind, last[1], max(end, last[2] or end))
        elif last is None or ev.t0 > last[1] or last[2] is None:
            # one whose start was not seen; or the open one's end, where its start reads
            # later: the system clock was set back while it ran (the hook's stamps follow
            # it, Sender.retime), and it must not stay open for the rest of the run
            self.latest[ev.pid] = (ev.kind, ev.t0, end)
        rows = self.rows.setdefault(ev.pid, {})
        r = rows.get(ev.kind) or BetweenRow(ev.kind)
        site, site_s = r.site, r.site_s
        if ev.site:
            sites = self.sites.setdefault((ev.pid, ev.kind), {})
            if ev.site in sites or len(sites) < MAX_SITES:
                sites[ev.site] = sites.get(ev.site, 0.0) + ev.length
                site, site_s = max(sites.items(), key=lambda kv: kv[1])
        measured = ev.forward_s >= 0.0
        rows[ev.kind] = BetweenRow(
            ev.kind,
            r.total_s + ev.length,
            r.count + 1,
            ev.t0,
            ev.t0 + ev.length,
            site=site,
            site_s=site_s,
            forward_s=r.forward_s + (min(ev.forward_s, ev.length) if measured else 0.0),
            measured_s=r.measured_s + (ev.length if measured else 0.0),
        )

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        steps = parts.get("steps")
        pid = steps.pid if steps is not None else None
        if pid not in self.rows:  # no steps yet: the first process that had such time
            pid = next(iter(self.rows), None)
        rows = self.rows.get(pid, {}) if pid is not None else {}
        parts["between"] = tuple(sorted(rows.values(), key=_order))
        parts["between_latest"] = tuple((p, *v) for p, v in self.latest.items())
        parts["passes_run"] = sum(
            passes_run((r.kind, r.count) for r in by_kind.values())
            for by_kind in self.rows.values()
        )


def _order(r: BetweenRow) -> tuple[int, str]:
    return (KIND_ORDER.index(r.kind) if r.kind in KIND_ORDER else len(KIND_ORDER), r.kind)


def pass_text(row: dict[str, Any], kind: str) -> str:
    """What passes of ``kind`` with a function named held (one that a forward opened, or its
    batch: the function that made its first module call), from a report's ``between_s`` row:
    ``made from collect_rollouts (stable_baselines3/common/on_policy_algorithm.py:202); 75%
    of it inside the model's forward calls, the rest between them``. A rollout's forward
    calls may run with grad on (in eval mode: tianshou's), an evaluation's opened it with
    grad off."""
    total = row.get("total_s") or 0.0
    site_s = row.get("site_s") or 0.0
    calls = "amid env steps" if kind == "rollout" else "with grad off"
    out = f"forward calls {calls}, made from {row['site']}"
    if total and site_s < 0.995 * total:
        out += f" ({site_s / total:.0%} of it)"
    measured = row.get("measured_s") or 0.0
    if measured > 0:
        inside = (row.get("forward_s") or 0.0) / measured
        out += f"; {inside:.0%} of it inside the model's forward calls, the rest between them"
    return out


def row_dict(b: BetweenRow) -> dict[str, Any]:
    """A snapshot's row as a report's ``between_s`` row (the fields ``pass_text`` reads)."""
    return {
        "total_s": b.total_s,
        "count": b.count,
        "site": b.site,
        "site_s": b.site_s,
        "forward_s": b.forward_s,
        "measured_s": b.measured_s,
    }
