"""A collective's record (:data:`perftop.events.comm.CollRecord`) by name, for every reader:
the session's comm model, the report's slices and the exports. Readers only: the hook
writes records as tuples and never imports this."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from perftop.events.comm import CollRecord


class Coll(NamedTuple):
    """A record's fields by name, of the types a reader computes with."""

    pg: str
    seq: int
    op: str
    nbytes: int
    sizes: str
    t: float
    thread: Any  # (truthy: the training thread launched it)
    call: str
    phase: str
    line: str
    gpu: float | None


def read_record(rec: CollRecord) -> Coll | None:
    """``rec`` by name (None: a record of a newer or damaged writer). An older writer's
    record stops at ``thread``: no call, phase or line (``""``), no GPU time (None)."""
    try:
        pg, seq, op, nb, sizes, t, th = rec[:7]
        seq, nb, t = int(seq), int(nb), float(t)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(t):
        return None  # no time a clock gives: the arrivals it would be lined up by
    origin = rec[7:10]
    call, phase, line = (str(x) for x in origin) if len(origin) == 3 else ("", "", "")
    gpu = rec[10] if len(rec) > 10 else None  # NCCL's time on the GPU, where timed
    gpu = float(gpu) if isinstance(gpu, (int, float)) and 0 <= gpu < math.inf else None
    return Coll(str(pg), seq, str(op), nb, str(sizes), t, th, call, phase, line, gpu)
