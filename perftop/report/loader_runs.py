"""DataLoaders made anew with the same settings, one after another: one row of the text
report each.

The HF Trainer makes a new evaluation DataLoader at every evaluation (unless its workers
are persistent), so a run with an evaluation every few hundred steps listed a loader row
and a row per worker for each one: 200 evaluations of 2 workers, 600 rows, the training
loader and its workers lost among them. Here a process's loaders that were each iterated
once, all after that process's first training step ended, with the same settings (dataset,
workers, batch, pinning, prefetch, persistence, start method, autograd at their first
batch, and the kind of interval outside the steps they started in) are a run where there
are at least :data:`RUN_FROM` of them. The training loader is never in one with the
evaluation's: it was iterated before the first step (where its settings equal the
evaluation's, as the Trainer's defaults make them), and one made anew each epoch (Keras
makes both anew, each iterated with autograd on) started in the steps, an evaluation's in
an evaluation. ``--json`` keeps every loader, each with the id of its run's first loader
(``remade_from``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perftop.model import Snapshot
from perftop.model.snapshot import Loader

RUN_FROM = 3  # loaders made alike before they are one row

Key = tuple[str, int, int]  # host, pid, loader_id


def _settings(ld: Loader) -> tuple[Any, ...]:
    return (
        ld.host,
        ld.pid,
        ld.dataset,
        ld.num_workers,
        ld.batch_size,
        ld.pin_memory,
        ld.prefetch_factor,
        ld.persistent_workers,
        ld.start_method,
        ld.grad,
        ld.during,
    )


def runs(snap: Snapshot) -> dict[Key, int]:
    """Each loader in a run, mapped to the id of its run's first loader (the lowest)."""
    # a loader's host is set only where a collector merged nodes, a step series' always
    first_step: dict[tuple[str, int | None], float | None] = {}
    for s in (snap.steps, *snap.ranks):
        first_step[(s.host, s.pid)] = first_step[("", s.pid)] = s.first_end_t
    alike: dict[tuple[Any, ...], list[Loader]] = {}
    for ld in snap.loaders:
        ended = first_step.get((ld.host, ld.pid))
        if len(ld.starts) == 1 and ended is not None and ld.starts[0] > ended:
            alike.setdefault(_settings(ld), []).append(ld)
    out: dict[Key, int] = {}
    for members in alike.values():
        if len(members) >= RUN_FROM:
            head = min(m.loader_id for m in members)
            out.update({(m.host, m.pid, m.loader_id): head for m in members})
    return out


def runs_of(loaders: Sequence[dict[str, Any]]) -> dict[Key, list[dict[str, Any]]]:
    """The JSON report's loaders by run (``remade_from``), each run's members in id order;
    a loader in none is absent."""
    out: dict[Key, list[dict[str, Any]]] = {}
    for ld in loaders:
        head = ld.get("remade_from")
        if head is not None:
            out.setdefault((ld.get("host") or "", ld["pid"], head), []).append(ld)
    for members in out.values():
        members.sort(key=lambda ld: ld["loader_id"])
    return out


def run_range(members: list[dict[str, Any]]) -> str:
    """``L1–L40``: the run's first and last loaders (its count: ``len(members)``)."""
    return f"L{members[0]['loader_id']}–L{members[-1]['loader_id']}"
