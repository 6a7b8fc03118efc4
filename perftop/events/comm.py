"""Collective events: what c10d's flight recorder says each rank's collectives did.

Standard library only. The hook reads the recorder from its background thread (never the
training thread) and sends what is new; the monitor lines ranks up by process group and
sequence id. Timestamps are wall-clock seconds, as everywhere (the recorder's are the
system clock's nanoseconds).
"""

from __future__ import annotations

from typing import Any

from perftop.events.base import Event, event

# One collective as one rank entered it: (pg, seq, op, bytes, sizes, t_created, thread,
# call, phase, line). ``pg`` is the process group's name ("0", or its description); ``seq``
# its collective sequence id in that group; ``op`` the recorder's name without the backend
# ("all_reduce"); ``bytes`` the input tensors' bytes; ``sizes`` the input shapes as text
# ("[[17]]"); ``thread`` 1 when the training thread launched it, else 0. From the stack the
# recorder kept (perftop/hook/coll_origin.py; older recordings stop at ``thread``):
# ``call`` the torch.distributed function called ("reduce_scatter_single"), ``phase`` the
# part of the step that launched it ("forward", "backward", "optimizer", "data", or ""),
# ``line`` the innermost user frame ("train.py:40 main"); "" where the stack shows none.
# Then ``gpu``: NCCL's time of it on the GPU in seconds (``duration_ms``, timing on), or
# None (gloo, untimed; older recordings stop at ``line``).
CollRecord = tuple[Any, ...]


@event("coll")
class CollBatch(Event):
    """Collectives this process entered since its last batch, oldest first. ``lost``
    counts records the recorder's ring overwrote before the hook read them (cumulative)."""

    t: float
    pid: int
    records: tuple[CollRecord, ...] = ()
    lost: int = 0


@event("coll_wait")
class CollWaiting(Event):
    """A collective this process entered has not completed for ``waited_s`` seconds: sent
    about once a second while it waits. ``line`` is the user's line the launching thread
    stands at (``file:line function``; "" when no user frame is on its stack)."""

    t: float
    pid: int
    pg: str
    seq: int
    op: str
    sizes: str
    t_created: float
    waited_s: float
    line: str = ""


@event("coll_info")
class CollInfo(Event):
    """How this process reads its collectives, once: ``buffer`` the recorder's ring size
    (0: no recorder, with ``why``)."""

    t: float
    pid: int
    buffer: int
    why: str = ""
