"""Host-device sync events: which user lines made (or would make) the host wait.

A hook sends at most one :class:`SyncBatch` per process and step, and only for a step
with something to say, so a loop that never syncs costs nothing on the wire.
"""

from __future__ import annotations

from typing import Any

from perftop.events.base import Event, event

# One site's count in one step: (op, file, line, function, kind, count, blocked_s, then
# lib_file, lib_line, lib_function, package). ``blocked_s``: host seconds spent inside the
# site's calls in this step, measured on an accelerator only (None elsewhere). The four
# library fields (appended later; absent in old recordings) name the library frame that
# made the call when file/line is the user's frame that led to it; with no user frame on
# the stack, file/line is the library's own and only ``package`` is set.
SiteCount = tuple[Any, ...]


@event("sync_info")
class SyncInfo(Event):
    """How a process watches for syncs, sent once when detection starts.

    ``cuda_debug``: every step is watched by the CUDA sync debug mode (kind ``sync``).
    ``sampled``: the dispatch-level detector (kind ``potential``) watches some steps.
    ``exact``: it watches every step (``PERFTOP_SYNC=all``), so its rates are exact.
    """

    t: float
    pid: int
    cuda_debug: bool
    sampled: bool
    early: int = 0
    every: int = 0
    real: bool = False  # CUDA's sync debug mode confirms the sampled steps' syncs (kind sync)
    exact: bool = False  # the exact mode (PERFTOP_SYNC=all): every step watched, weight 1


@event("sync")
class SyncBatch(Event):
    """Sync sites seen in one step. ``sampled`` marks a step the detector watched (sent
    even when empty, so per-step rates divide by the steps actually observed).

    ``sites`` are the step's own syncs. ``between``: syncs made in that watched stretch
    but outside training steps (an evaluation or sampling pass the tracker cut out),
    same layout; ``passes``: how many such passes began and ended in it. A batch of no
    watched step and no step's syncs (``sampled`` false, ``sites`` empty) holds a pass
    watched on its own draw, or a last pass at exit. ``weight``: for
    a sampled step, 1 / the probability it had of being watched (the steps it stands
    for), by which the model weighs it in per-step rates; 1 in older recordings."""

    pid: int
    step: int
    sampled: bool
    sites: tuple[SiteCount, ...] = ()
    between: tuple[SiteCount, ...] = ()
    passes: int = 0
    weight: float = 1.0
