"""The monitor process's garbage collector, settled once the monitor is up.

Measured in the demo's TUI at 160x48 (90 s, `gc.callbacks`): Python's cyclic collector
took 0.62% of a core. A full collection walked ~117,000 objects (the modules, classes and
widgets loaded at start-up, which are never garbage) in ~65 ms, a pause of the screen
too; the youngest generation was collected at every 700 net allocations, and the events
and snapshots the monitor makes pass through it by the thousand. Settled (start-up's
objects frozen after one collection, the youngest collected every 7,000), the same run
took 0.21%, its one collection at start-up included. Never called in a job's process:
the hook does not import this.
"""

from __future__ import annotations

import gc

THRESHOLD0 = 7000  # allocations less deallocations between collections of generation 0
_settled = False


def settle() -> None:
    """Once per process: collect what start-up left, freeze the rest (a full collection
    never scans it again) and collect the youngest generation less often."""
    global _settled
    if _settled:
        return
    _settled = True
    gc.collect()
    gc.freeze()
    _, t1, t2 = gc.get_threshold()
    gc.set_threshold(THRESHOLD0, t1, t2)
