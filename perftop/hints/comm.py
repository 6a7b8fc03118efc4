"""``comm-bound``: a rank's training thread waits at collectives for a large share of its
step (exposed communication, from :mod:`perftop.model.comm`), with advice that fits what
was seen: a late rank to wait for, DDP's many buckets, FSDP's re-gathers in backward, or
explicit collectives in the loop (named at the user's line).
"""

from __future__ import annotations

from perftop.codepath import code_line
from perftop.hints.base import fraction, seconds, threshold
from perftop.model.comm_rows import RankComm, rank_name
from perftop.model.snapshot import Hint, Snapshot

SHARE, SHARE_STAY = 0.20, 0.15  # exposed communication as a share of the rank's step


def _label(r: RankComm) -> str:
    return rank_name(r.rank, r.pid)


def _count(r: RankComm, op: str, phase: str, call: str | None = None) -> int:
    """How many ``op`` collectives ``phase`` launched (with ``call``, when given); a
    recording without their sites: every ``op`` when ``call`` is given, else none."""
    row = next((c for c in r.collectives if c.op == op), None)
    if row is None:
        return 0
    if not row.sites:
        return row.count if call is not None else 0
    return sum(x.count for x in row.sites
               if x.phase == phase and (call is None or x.call == call))  # fmt: skip


def _fsdp(r: RankComm) -> bool:
    """FSDP's reduce-scatters seen: as such (NCCL), or as gloo's all_reduce."""
    return any("reduce_scatter" in c.op or any("reduce_scatter" in x.call for x in c.sites)
               for c in r.collectives)  # fmt: skip


def _short(line: str) -> str:
    """``train.py:54`` of ``/path/train.py:54 main`` (a library's file from its package's
    folder on)."""
    return code_line(line).split(" ", 1)[0]


def comm_bound(snap: Snapshot, active: frozenset[str]) -> list[Hint]:
    bar = threshold("comm-bound", active, SHARE, SHARE_STAY)
    rows = [r for r in snap.comm.ranks if r.exposed_share is not None and r.wait_s]
    worst = max(rows, key=lambda r: r.exposed_share or 0.0, default=None)
    if worst is None or (worst.exposed_share or 0.0) < bar:
        return []
    share, wait = worst.exposed_share or 0.0, worst.wait_s or 0.0
    evidence = [
        f"{_label(worst)} waits {seconds(wait)} a step at collectives with nothing left to "
        f"launch ({fraction(share)} of its step), {seconds(worst.overlap_s or 0.0)} more "
        "overlapped with its own work (medians)"
    ]
    advice = []
    s = snap.comm.straggler
    if s is not None and s.pid != worst.pid:
        last = snap.rank_label(s.rank, s.pid, s.host)
        evidence.append(f"it waits for {last}, the last to arrive at {fraction(s.last_share)}"
                        " of the collectives")  # fmt: skip
        advice.append(f"The wait is {last} arriving late, not the network: make {last} "
                      "faster first (see the straggler hint and its data wait).")  # fmt: skip
    fsdp = _fsdp(worst)
    regather = _count(worst, "all_gather", "backward")
    if fsdp and regather and worst.steps:
        advice.append(
            f"FSDP all-gathers {round(regather / worst.steps)} times a step again in backward: "
            "reshard_after_forward=False on the last layers keeps their parameters from "
            "forward to backward (more memory, fewer all-gathers)."
        )
    buckets = _count(worst, "all_reduce", "backward", "")  # DDP's reducer, from C++
    if not fsdp and worst.steps and buckets >= 2 * worst.steps:
        advice.append(
            f"DDP all-reduces in {round(buckets / worst.steps)} buckets a step: a larger "
            "bucket_cap_mb makes fewer, bigger all-reduces; gradients that are ready late "
            "(the first layers) cannot overlap, whatever the buckets."
        )
    explicit = [c for c in worst.collectives if c.op in ("barrier", "all_reduce", "broadcast")
                and c.training_thread and (c.wait_p50_s or 0.0) > 0.1 * wait]  # fmt: skip
    if any(c.op == "barrier" for c in explicit):
        lines = [x.line for c in explicit if c.op == "barrier" for x in c.sites if x.line]
        at = f" ({_short(lines[0])})" if lines else ""
        advice.append(f"A barrier in the loop{at} makes every rank wait for the slowest each "
                      "time: log and checkpoint without one, or less often.")  # fmt: skip
    advice.append("Under gradient accumulation, call model.set_requires_gradient_sync(False) "
                  "before the micro-batches but the last: one reduce-scatter per optimizer "
                  "step, not per backward." if fsdp else "Under gradient accumulation, wrap "
                  "the micro-batches but the last in model.no_sync(): one all-reduce per "
                  "optimizer step, not per backward.")  # fmt: skip
    return [
        Hint(
            id="comm-bound",
            severity="medium",
            title=f"Communication-bound: {_label(worst)} waits {fraction(share)} of its step "
            "at collectives",
            evidence=tuple(evidence),
            advice=tuple(advice),
            est_gain=round(share, 4),
            est_gain_text=f"up to {fraction(share)} of step time, the exposed wait",
            panel="ranks",
        )
    ]
