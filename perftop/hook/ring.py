"""The steps' way from the training thread to the sender: a ring of doubles.

The tracker writes each step's eight numbers into the ring (``StepTracker.push``; in the
compiled build, eight C stores) and the sender reads them out when it sends. Before, each
step was a tuple of fresh floats held in a deque until the next send: ~1,500 small objects
kept alive for a quarter of a second, then freed at once, and the deque's blocks taken from
the C heap among torch's own tensors. That churn slowed the job's own allocations (in a
simulated run, the hook's memory allocator work per step was several times its own), and a
held tuple is a cache line the step never reads again. The ring is one anonymous mapping,
made at the first step (a process that never trains maps nothing); its pages are touched
only as far as steps are written, and once everything is read the writer starts again
from its first slot, where the lines are still warm.

One writer (the training thread, under the GIL) and one reader (the sender, the same
thread where it sends itself): the writer fills a slot and then counts it (``ring_w``),
the reader copies what is counted and then moves ``ring_r`` on, once. A full ring drops
the new step (the sender counts it from the gap in the indices, as it did for the
bounded deque); the writer starts again from slot 0 only when the reader has taken
everything (``ring_r == ring_w``), setting its own count first, so a reader in between
sees nothing to take. A fork's child starts empty (the tracker's ``reset``); its
mapping is its own (private).
"""

from __future__ import annotations

from typing import Any

from perftop.hook.steps import RING_F


def buffered(tr: Any) -> int:
    """Steps written and not read yet."""
    return max(0, tr.ring_w - tr.ring_r)


def take(tr: Any, limit: int) -> list[float]:
    """Up to ``limit`` steps' numbers, in order, eight a step, read out of the ring."""
    r, w = tr.ring_r, tr.ring_w
    n = min(w - r, limit)
    if n <= 0 or tr.ring_buf is None:
        return []
    cap, buf = tr.ring_cap, tr.ring_buf
    a = r % cap
    first = min(n, cap - a)
    got = buf[a * RING_F : (a + first) * RING_F].tolist()
    if first < n:  # wrapped around the end
        got += buf[: (n - first) * RING_F].tolist()
    tr.ring_r = r + n  # last: the writer may reuse those slots from here on
    return got


def phases(tr: Any, index: int) -> Any:
    """The phases of step ``index``, taken (written beside the ring: a dict)."""
    return tr.ring_phases.pop(index, None)


def discard(tr: Any) -> int:
    """Drop what is in the ring (the exit's last word); how many steps that was."""
    n = buffered(tr)
    tr.ring_r = tr.ring_w
    tr.ring_phases.clear()
    return n
