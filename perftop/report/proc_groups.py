"""DataLoader workers made anew each epoch, and a pool's processes made anew, one row of the
text report's Processes table.

A loader without ``persistent_workers`` (torch's default) starts its workers again at
every epoch, and every evaluation over it starts its own: a 100-epoch run of 8 workers
listed 800 rows, the main process lost among them. Here the processes that held the same
place (host, rank, loader, worker index; the loaders of a run made anew alike are one
loader, loader_runs.py) are one row where there were at least
:data:`GROUP_FROM` of them, its figures each process's figures taken together: the range of
their CPU averages, the highest of their maxima, the first sampled one's USS at its start
and the last sampled one's at its end, their reads and writes summed. Processes of no
role of their own (``other``) made anew alike, one after another, by one parent with one
command line (a pool made each epoch: Keras's ``PyDataset`` workers) are grouped the same
way, by their slot in the pool (:func:`pool_slots`). ``--json`` keeps every process.
"""

from __future__ import annotations

from typing import Any

from perftop.report.loader_runs import Key, run_range

GROUP_FROM = 3  # processes in one place before they are one row


def _place(
    p: dict[str, Any], heads: dict[Key, int], slots: dict[int, int]
) -> tuple[Any, ...] | None:
    if p.get("role") == "other" and id(p) in slots:
        return (p.get("host"), "other", p.get("parent_pid"), p.get("cmdline"), slots[id(p)])
    if p.get("role") != "worker" or p.get("worker_id") is None:
        return None
    loader = p.get("loader_id")
    if loader is not None:  # a loader of a run: the run's first
        loader = heads.get((p.get("host") or "", p.get("parent_pid") or 0, loader), loader)
    return (p.get("host"), p.get("rank"), p.get("parent_pid"), loader, p["worker_id"])


def pool_slots(procs: list[dict[str, Any]]) -> dict[int, int]:
    """Each ``other`` process the probes saw, by ``id()``, its slot among the processes of
    its parent with its command line: the lowest slot whose last process they saw ended
    before it began, in the order they began. A pool made anew each epoch (Keras's
    ``PyDataset`` workers) fills the same slots epoch after epoch; processes that ran
    together (a pool kept for the run) each have a slot of their own."""
    pools: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for p in procs:
        if p.get("role") == "other" and p.get("first_seen_t") is not None:
            key = (p.get("host"), p.get("parent_pid"), p.get("cmdline") or p.get("name"))
            pools.setdefault(key, []).append(p)
    out: dict[int, int] = {}
    for members in pools.values():
        ends: list[float] = []  # each slot's last process's last sight
        for p in sorted(members, key=lambda m: m["first_seen_t"]):
            free = next((i for i, end in enumerate(ends) if end < p["first_seen_t"]), None)
            if free is None:
                free = len(ends)
                ends.append(0.0)
            ends[free] = p.get("last_seen_t") or p["first_seen_t"]
            out[id(p)] = free
    return out


def _most(ms: list[dict[str, Any]], key: str) -> Any:
    vals = [m[key] for m in ms if m.get(key) is not None]
    return max(vals) if vals else None


def _first(ms: list[dict[str, Any]], key: str) -> Any:
    """The first process's figure that the probes read (an evaluation's short-lived
    worker may have ended before their first look)."""
    return next((m[key] for m in ms if m.get(key) is not None), None)


def _sum(ms: list[dict[str, Any]], key: str) -> Any:
    vals = [m[key] for m in ms if m.get(key) is not None]
    return sum(vals) if vals else None


def _merged(ms: list[dict[str, Any]], run: str) -> dict[str, Any]:
    avgs = [m["cpu_percent_avg"] for m in ms if m.get("cpu_percent_avg") is not None]
    named = next((m for m in ms if m.get("name")), ms[0])  # one the probes saw
    return {
        **ms[0],
        "name": named.get("name"),
        "cmdline": named.get("cmdline"),
        "loader_run": run,
        "processes": len(ms),
        "cpu_percent_avg_range": (min(avgs), max(avgs)) if avgs else None,
        "cpu_percent_max": _most(ms, "cpu_percent_max"),
        "rss_bytes_max": _most(ms, "rss_bytes_max"),
        "pss_bytes_max": _most(ms, "pss_bytes_max"),
        "uss_bytes_first": _first(ms, "uss_bytes_first"),
        "uss_bytes_last": _first(ms[::-1], "uss_bytes_last"),
        "io_read_bytes": _sum(ms, "io_read_bytes"),
        "io_write_bytes": _sum(ms, "io_write_bytes"),
    }


def grouped(
    procs: list[dict[str, Any]], runs: dict[Key, list[dict[str, Any]]] | None = None
) -> list[dict[str, Any]]:
    """``procs`` in their order, the workers of one place (at least :data:`GROUP_FROM`;
    the report lists them in pid order, the order they started) as one row where the first
    of them was; a row that stands for several has ``processes``, their count,
    ``cpu_percent_avg_range`` and ``loader_run`` (``L1–L40`` where its loaders were a
    run of ``runs``, from ``loader_runs.runs_of``, else "")."""
    heads: dict[Key, int] = {}
    labels: dict[tuple[str, int, int], str] = {}
    for (host, pid, head), members in (runs or {}).items():
        labels[(host, pid, head)] = run_range(members)
        heads.update({(host, pid, m["loader_id"]): head for m in members})
    slots = pool_slots(procs)
    places: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for p in procs:
        place = _place(p, heads, slots)
        if place is not None:
            places.setdefault(place, []).append(p)
    out: list[dict[str, Any]] = []
    for p in procs:
        place = _place(p, heads, slots)
        group = places.get(place) if place is not None else None
        if place is None or group is None or len(group) < GROUP_FROM:
            out.append(p)
        elif group[0] is p:
            run = ""  # a pool's row names no loader
            if p.get("role") == "worker":
                run = labels.get((p.get("host") or "", p.get("parent_pid") or 0, place[3]), "")
            out.append(_merged(group, run))
    return out
