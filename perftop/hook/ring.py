"""The steps' way from the training thread to the sender: a ring of wire records.

The tracker stores each step into the ring as the record the wire sends
(``wire.STEP_RECORD``: pid, index, epoch times, phases, source; in the compiled build, a
few C stores) and the sender sends the ring's bytes as they are: no Python object per step
on either side. Before, each step was a tuple of fresh floats held in a deque until the
next send (~1,500 small objects kept for a quarter of a second, then freed at once) and the
send built a bytes object per step again: that churn and those lines cost the job's own
step more than the hook's own work did. The ring is one anonymous mapping, made at the first
step (a process that never trains maps nothing); its pages are touched only as far as steps
are written, and once everything is read the writer starts again from its first slot,
where the lines are still warm.

One writer (the training thread, under the GIL) and one reader (the sender, the same
thread where it sends itself): the writer fills a slot and then counts it (``ring_w``),
the reader copies what is counted and then moves ``ring_r`` on, once. A full ring drops
the new step (the sender counts it from the gap in the indices, as it did for the bounded
deque); the writer starts again from slot 0 only when the reader has taken everything
(``ring_r == ring_w``), setting its own count first, so a reader in between sees nothing
to take. A step with phases has ``PHASED`` added to its source byte and its phases beside
the ring (sent as JSON, in its place). A fork's child starts empty (the tracker's
``reset``, which also takes the child's pid); its mapping is its own (private).
"""

from __future__ import annotations

from typing import Any

from perftop.hook.steps import PHASED, RING_REC


def buffered(tr: Any) -> int:
    """Steps written and not read yet."""
    return max(0, tr.ring_w - tr.ring_r)


def take(tr: Any, limit: int) -> bytes:
    """Up to ``limit`` steps' records, in order, read out of the ring."""
    r, w = tr.ring_r, tr.ring_w
    n = min(w - r, limit)
    if n <= 0 or tr.ring_buf is None:
        return b""
    cap, buf = tr.ring_cap, tr.ring_buf
    a = r % cap
    first = min(n, cap - a)
    got = bytes(buf[a * RING_REC : (a + first) * RING_REC])
    if first < n:  # wrapped around the end
        got += bytes(buf[: (n - first) * RING_REC])
    tr.ring_r = r + n  # last: the writer may reuse those slots from here on
    return got


def phased(records: bytes) -> bool:
    """Whether any of ``records`` has phases (its source byte marked)."""
    return max(records[RING_REC - 1 :: RING_REC]) >= PHASED


def phases(tr: Any, index: int) -> Any:
    """The phases of step ``index``, taken (kept beside the ring: a dict)."""
    return tr.ring_phases.pop(index, None)


def discard(tr: Any) -> int:
    """Drop what is in the ring (the exit's last word); how many steps that was."""
    n = buffered(tr)
    tr.ring_r = tr.ring_w
    tr.ring_phases.clear()
    return n
