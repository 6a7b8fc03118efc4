"""DataLoader worker events: what each worker measures about the batches it produces.

Standard library only (the hook imports it). A worker sends its running totals a few
times a second and once more as it exits, never one event per batch, so a short-lived
worker (an epoch shorter than the probe interval) still leaves its figures, and a dropped
event costs nothing but resolution: the next one carries the totals.
"""

from __future__ import annotations

from perftop.events.base import Event, event


@event("worker_stats")
class WorkerStats(Event):
    """Running totals of one DataLoader worker since it started producing batches.

    ``busy_s`` is the wall time spent making batches (dataset reads, transforms, collate),
    ``cpu_s`` the CPU time the worker's thread used meanwhile: busy time that is not CPU
    time is spent waiting (file reads, sleeps, locks). ``batch_bytes`` sums the tensor
    bytes of the batches produced (what crosses to the main process), ``torch_threads``
    is ``torch.get_num_threads()`` in the worker.
    """

    t: float
    pid: int
    ppid: int
    worker_id: int
    num_workers: int
    start_t: float
    batches: int
    busy_s: float
    cpu_s: float
    batch_bytes: int | None = None
    torch_threads: int | None = None
    final: bool = False
