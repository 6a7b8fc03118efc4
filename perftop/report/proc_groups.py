"""DataLoader workers made anew each epoch, one row of the text report's Processes table.

A loader without ``persistent_workers`` (torch's default) starts its workers again at
every epoch, and every evaluation over it starts its own: a 100-epoch run of 8 workers
listed 800 rows, the main process lost among them. Here the processes that held the same
place (host, rank, loader, worker index) are one row where there were at least
:data:`GROUP_FROM` of them, its figures each process's figures taken together: the range of
their CPU averages, the highest of their maxima, the first one's USS at its start and the
last one's at its end, their reads and writes summed. ``--json`` keeps every process.
"""

from __future__ import annotations

from typing import Any

GROUP_FROM = 3  # processes in one place before they are one row


def _place(p: dict[str, Any]) -> tuple[Any, ...] | None:
    if p.get("role") != "worker" or p.get("worker_id") is None:
        return None
    return (p.get("host"), p.get("rank"), p.get("parent_pid"), p.get("loader_id"), p["worker_id"])


def _most(ms: list[dict[str, Any]], key: str) -> Any:
    vals = [m[key] for m in ms if m.get(key) is not None]
    return max(vals) if vals else None


def _sum(ms: list[dict[str, Any]], key: str) -> Any:
    vals = [m[key] for m in ms if m.get(key) is not None]
    return sum(vals) if vals else None


def _merged(ms: list[dict[str, Any]]) -> dict[str, Any]:
    avgs = [m["cpu_percent_avg"] for m in ms if m.get("cpu_percent_avg") is not None]
    return {
        **ms[0],
        "processes": len(ms),
        "cpu_percent_avg_range": (min(avgs), max(avgs)) if avgs else None,
        "cpu_percent_max": _most(ms, "cpu_percent_max"),
        "rss_bytes_max": _most(ms, "rss_bytes_max"),
        "pss_bytes_max": _most(ms, "pss_bytes_max"),
        "uss_bytes_first": ms[0].get("uss_bytes_first"),
        "uss_bytes_last": ms[-1].get("uss_bytes_last"),
        "io_read_bytes": _sum(ms, "io_read_bytes"),
        "io_write_bytes": _sum(ms, "io_write_bytes"),
    }


def grouped(procs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``procs`` in their order, the workers of one place (at least :data:`GROUP_FROM`;
    the report lists them in pid order, the order they started) as one row where the first
    of them was; a row that stands for several has ``processes``, their count, and
    ``cpu_percent_avg_range``."""
    places: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for p in procs:
        place = _place(p)
        if place is not None:
            places.setdefault(place, []).append(p)
    out: list[dict[str, Any]] = []
    for p in procs:
        place = _place(p)
        members = places.get(place) if place is not None else None
        if members is None or len(members) < GROUP_FROM:
            out.append(p)
        elif members[0] is p:
            out.append(_merged(members))
    return out
