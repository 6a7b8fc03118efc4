"""The events a real 2-rank run sends when rank 0 waits in an all-reduce rank 1 never
enters: for the hint's near-miss table and the hang threshold's tests alike."""

from __future__ import annotations

from perftop.events import CollBatch, CollWaiting, Event, Hello, Step

PID = 100  # rank 0's; rank 1 is PID + 1


def hang_events(waited: float, pid: int = PID) -> tuple[list[Event], CollWaiting]:
    """Two ranks of 10 steps and an all-reduce each step; rank 0 enters an 11th at t=1001
    that rank 1 never enters: (the ranks' events, rank 0's report of its wait ``waited``
    s on, as the monitor sends it)."""
    evs: list[Event] = []
    for rank in (0, 1):
        p = pid + rank
        evs.append(Hello(1000.0, p, 1, "a", ("train.py",), rank=rank, world_size=2))
        recs = [("default_pg", i + 1, "all_reduce", 64, "[[16]]", 1000.02 + i * 0.1, 1)
                for i in range(10)]  # fmt: skip
        evs += [Step(p, i, 1000.0 + i * 0.1, 1000.08 + i * 0.1, backward=0.05) for i in range(10)]
        if rank == 0:
            recs.append(("default_pg", 11, "all_reduce", 64, "[[16]]", 1001.0, 1))
        evs.append(CollBatch(1001.5, p, tuple(recs)))
    waiting = CollWaiting(1001.0 + waited, pid, "default_pg", 11, "all_reduce", "[[16]]", 1001.0,
                          waited, "train.py:9 main")  # fmt: skip
    return evs, waiting
