"""The workers' cost in RAM: ``worker-memory`` (large or growing private memory, the
copy-on-write pattern of a dataset held as Python objects); their cost in CPU is in
cores.py.

Workers started with ``spawn`` or ``forkserver`` share no pages with the training process:
each imports torch and the job's modules anew (~150 MiB on CPU torch), which is its
private memory from the start and no copy-on-write. For them only a large or a steadily
growing figure is a hint, said without the copy-on-write story and its advice."""

from __future__ import annotations

from perftop.fmt import count
from perftop.hints.base import nbytes, worker_procs
from perftop.model.snapshot import Hint, ProcRow, Snapshot

MIB = 2**20
USS_LARGE = 512 * MIB  # private memory per worker that is large whatever its cause
USS_GROWN = 128 * MIB  # ... or this much, after growing by GROWTH since it started
GROWTH = 64 * MIB
# ... or, growing steadily by at least this much a second (every worker), with this much
# still to copy before it holds its whole RSS: the growth is projected to its end
GROW_RATE = 0.5 * MIB
GROW_LEFT = 64 * MIB
MEM_LOW = 0.10  # host memory available below this share of the total is pressure


def worker_memory(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    procs = [p for _, p in worker_procs(snap) if p.uss_bytes is not None]
    if not procs:
        return []
    k = 0.8 if "worker-memory" in active else 1.0
    n = len(procs)
    uss = sum(p.uss_bytes or 0 for p in procs) / n
    methods = {ld.start_method for ld in snap.loaders if ld.num_workers}
    spawned = bool(methods) and methods <= {"spawn", "forkserver"}
    first = [p.uss_bytes_first for p in procs if p.uss_bytes_first is not None]
    # a spawned worker's growth since its start is its imports, no dataset's pages copied
    grown = uss - sum(first) / len(first) if len(first) == n and not spawned else 0.0
    # ... and so is its steady rise while young (sampled every tick for its first 30 s)
    growing = None if spawned else _growth(procs, k)
    if not (uss >= k * USS_LARGE or (uss >= k * USS_GROWN and grown >= k * GROWTH) or growing):
        return []
    total = sum(p.uss_bytes or 0 for p in procs)
    ev = [
        f"{count(n, 'worker')} hold {nbytes(total)} of private memory (USS) together, "
        f"{nbytes(uss)} each"
        + (f", up {nbytes(grown)} since they started" if grown >= GROWTH / 2 else "")
    ]
    h = snap.host
    if growing is not None:
        rate, rss, eta = growing
        ev.append(
            f"each grows steadily by {nbytes(rate)}/s; at this pace it reaches its RSS, "
            f"{nbytes(rss)} (every page it shares with the training process copied: the "
            f"most it can hold), in about {_duration(eta)}; {nbytes(rss * n)} for the "
            f"{count(n, 'worker')}"
            + (
                ", more than the host has available"
                if h.mem_available_bytes is not None and (rss - uss) * n > h.mem_available_bytes
                else ""
            )
        )
    if spawned:
        ev.append(
            f"the workers are started with {' and '.join(sorted(methods))}: they share no "
            "memory with the training process, each holds its own interpreter, torch and "
            "what it builds"
        )
    elif grown >= GROWTH / 2 or growing is not None:
        ev.append(
            "private memory that grows as workers read the dataset is the copy-on-write "
            "pattern: touching Python objects (their reference counts) copies the pages "
            "they share with the training process"
        )
    low = False
    if h.mem_total_bytes and h.mem_available_bytes is not None:
        low = h.mem_available_bytes < MEM_LOW * h.mem_total_bytes
        ev.append(
            f"the host has {nbytes(h.mem_available_bytes)} of {nbytes(h.mem_total_bytes)} "
            "memory available"
        )
    more = max(8, 2 * n)
    ev.append(f"at {nbytes(uss)} each, {more} workers would hold {nbytes(uss * more)}")
    dataset = next((ld.dataset for ld in snap.loaders if ld.num_workers), "")
    what = f" ({dataset})" if dataset else ""
    return [
        Hint(
            id="worker-memory",
            severity="high" if low or (h.swap_used_bytes or 0) > 0 else "medium",
            title=f"Worker memory: each DataLoader worker holds {nbytes(uss)} of its own"
            + (", and growing" if growing is not None else ""),
            evidence=tuple(ev),
            advice=_spawned_advice(what) if spawned else _advice(what),
            est_gain=None,
            est_gain_text=f"memory, not speed: {nbytes(total)} of RAM",
            panel="procs",
        )
    ]


def _advice(what: str) -> tuple[str, ...]:
    return (
        f"Store the dataset{what} as numpy arrays or tensors (a few large objects) "
        "instead of lists or dicts of Python objects.",
        "Call gc.freeze() after building the dataset and before the DataLoader "
        "starts its workers, so the garbage collector does not touch every object.",
        "Use fewer workers: each one costs this much RAM.",
    )


def _spawned_advice(what: str) -> tuple[str, ...]:
    return (
        "Use fewer workers: each one costs this much RAM.",
        f"Keep what each worker builds small: the dataset{what} is pickled to every "
        "worker, and what it loads at start is loaded once per worker.",
    )


def _growth(procs: list[ProcRow], k: float) -> tuple[float, float, float] | None:
    """(bytes/s, RSS, seconds left) when every worker's private memory grows steadily (the
    model's fit, ``ProcRow.uss_growth_bps``) by ``GROW_RATE`` or more and has at least
    ``GROW_LEFT`` of its RSS still shared: the copy-on-write growth, projected to the time
    each worker holds all of it. The slowest worker's pace, the largest RSS."""
    rates = [p.uss_growth_bps for p in procs]
    if any(r is None or r < k * GROW_RATE for r in rates):
        return None
    rate = min(r for r in rates if r is not None)
    rss = max(p.rss_bytes or 0 for p in procs)
    left = max(rss - (p.uss_bytes or 0) for p in procs)
    if left < k * GROW_LEFT:
        return None
    return rate, float(rss), left / rate


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
