"""Who waited for whom at the collectives every rank entered: each collective's
arrivals and waits, and the straggler the others wait for.

Pure functions of the matched collectives and of each rank's exposed and overlapped wait
per step (merged in :mod:`perftop.model.comm_merge`), kept apart from
:class:`~perftop.model.comm.CommReducer`'s bookkeeping of records, groups and hangs (see
:mod:`perftop.model.comm` for how a wait is exposed or overlapped).
"""

from __future__ import annotations

from typing import Any

from perftop.model.comm_rows import CommStraggler
from perftop.model.stats import median

MIN_SHARE = 0.10  # the others' wait for the straggler, as a share of the step
MIN_WAIT_S = 0.002
MIN_LAST_SHARE = 0.6  # ... and last at this share of the collectives, or of all the wait


def arrivals(by: dict[int, tuple[Any, ...]]) -> dict[int, float]:
    """Each rank's arrival at one collective (``by``: pid -> its record). Where every rank
    has NCCL's time of it on the GPU, from that: the collective ends on all ranks at once,
    so the rank of the shortest time came last and each other waited its time's excess
    (a rank whose GPU is late though its host launched early is found); the arrivals are
    set back from the last launch on the host by those waits. Else its launch on the host
    (the recorder's creation time: gloo's, or NCCL's untimed)."""
    gpu = [float(v[6]) for v in by.values() if len(v) > 6 and v[6] is not None]
    if gpu and len(gpu) == len(by):
        end, first = max(v[3] for v in by.values()), min(gpu)
        return {pid: end - (v[6] - first) for pid, v in by.items()}
    return {pid: v[3] for pid, v in by.items()}


# One collective as the merge (comm_merge.py) reads it: for each rank (pid, its (pid, pg, op), its
# (arrival, last arrival, pid last), its wait), and the pid that arrived last.
Arrived = tuple[tuple[tuple[int, tuple[int, str, str], tuple[float, float, int], float], ...], int]


def arrived(pg: str, by: dict[int, tuple[Any, ...]]) -> Arrived:
    """One collective's arrivals and waits, and the rank that arrived last."""
    at = arrivals(by)
    last = max(at, key=at.__getitem__)
    end = at[last]
    return tuple((pid, (pid, pg, v[0]), (at[pid], end, last), end - at[pid])
                 for pid, v in by.items()), last  # fmt: skip


def _straggler(
    per_pid: dict[int, dict[float, list[Any]]],
    last_count: dict[int, int],
    matched: int,
    step_p50: dict[int, float | None],
    who: dict[int, tuple[int | None, str]],
) -> CommStraggler | None:
    pids = [p for p in per_pid if per_pid[p]]
    if len(pids) < 2 or not matched:
        return None
    best: tuple[float, int] | None = None
    for q in pids:
        others = [median([s[2].get(q, 0.0) for s in per_pid[r].values()]) or 0.0
                  for r in pids if r != q]  # fmt: skip
        w = median(others) or 0.0
        if best is None or w > best[0]:
            best = (w, q)
    if best is None:  # pids has two or more: not reached
        return None
    step = median([v for v in step_p50.values() if v]) or 0.0
    w, q = best
    last = last_count.get(q, 0) / matched
    # of all the exposed wait, the share for q: a rank late at the first of a step's many
    # collectives only (a slow loader under FSDP2) is last at few of them
    total = sum(sum(s[2].values()) for r in pids for s in per_pid[r].values())
    caused = sum(s[2].get(q, 0.0) for r in pids if r != q for s in per_pid[r].values())
    share = caused / total if total > 0 else 0.0
    if step <= 0 or w < max(MIN_SHARE * step, MIN_WAIT_S) or max(last, share) < MIN_LAST_SHARE:
        return None
    rank, host = who.get(q, (None, ""))
    return CommStraggler(rank, q, host, w, step, last, share)
