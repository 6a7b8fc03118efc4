"""A real recording of a hang across two "nodes", for the tests and the screenshots."""

from __future__ import annotations

from pathlib import Path

from perftop.model import Snapshot

HANG = Path(__file__).parent / "recordings" / "collect_hang.perftop"


def mid_hang() -> tuple[Snapshot, Snapshot]:
    """A real `perftop collect --record` of two "nodes" on one machine (PERFTOP_HOST n1
    and n2, each `perftop run --headless --forward` of `torchrun --nnodes=2
    --nproc-per-node=2` of tests/workloads/train4.py with SLOW_RANK=2 HANG_RANK=3 HANG_AT=15
    HANG_S=12 STEPS=30 PERFTOP_HANG_AFTER=3): rank 2 sleeps 30 ms before each backward,
    rank 3, on n2, sleeps 12 s before a metric all_reduce the others wait in. Replayed to the first moment the hang shows with the
    stack n2's perftop dumped of rank 3; and the whole run. Each node's session shows hints,
    as the collector's does."""
    from perftop.events import CollWaiting
    from perftop.hints import hinted_session
    from perftop.model.fleet import FleetSession
    from perftop.recording import read_events

    events = list(read_events(HANG))
    f = FleetSession(hinted_session)  # as the collector's: each node's hints
    during = None
    for ev in events:
        f.apply(ev)
        if during is None and isinstance(ev, CollWaiting):
            snap = f.snapshot()
            hang = next((h for h in snap.comm.hangs if h.ongoing), None)
            if hang is not None and any(st.host == "n2" for st in snap.stalls):
                during = snap
    assert during is not None
    return during, f.snapshot()
