"""A rank's merged wait intervals by the step each starts in, and each step's sums, kept
from one snapshot to the next (:mod:`perftop.model.comm_merge` says which intervals came
and went).

An interval belongs to the last step that began at or before its start, if it started
before that step ended (else it lies between steps: no step's). Steps only come after the
last one, so that step is known for good once a later step began: only the intervals that
start after the last step's start can move (:attr:`StepSlots.pending`). A step's sums are
made again from its intervals in order when one of them comes or goes, as a fresh merge
adds them, so the figures are the same.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from operator import itemgetter
from typing import Any

Comp = tuple[float, float, float, int]  # start, end, the rank's last arrival, who was last
_T0 = itemgetter(0)


class StepSlots:
    __slots__ = ("pid", "at", "by_step", "slots", "pending", "dirty", "last_t0")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.at: dict[Comp, float | None] = {}  # interval -> its step's start (None: none)
        self.by_step: dict[float, list[Comp]] = {}  # a step's start -> its intervals, sorted
        self.slots: dict[float, list[Any]] = {}  # ... -> [exposed, overlapped, {pid: exposed}]
        self.pending: set[Comp] = set()  # intervals whose step a later step may be
        self.dirty: set[float] = set()  # steps whose sums are to be made again
        self.last_t0: float | None = None  # the last step's start when they were placed

    def change(self, gone: list[Comp], came: list[Comp], steps: Any) -> None:
        """Intervals ``gone`` out, ``came`` in; ``steps``: the rank's (t0, t1), in order."""
        last = steps[-1][0] if steps else None
        if not gone and not came and last == self.last_t0:
            return  # nothing to place: no step came either
        for c in gone:
            self._unplace(c)
        if last != self.last_t0:
            self.last_t0 = last
            for c in list(self.pending):
                self._unplace(c)
                self._place(c, steps)
        for c in came:
            self._place(c, steps)

    def _place(self, c: Comp, steps: Any) -> None:
        # by bisection on the steps themselves (a deque: a few probes, no list made of
        # its 2,048 starts at each snapshot)
        i = bisect_right(steps, c[0], key=_T0) - 1
        t = steps[i][0] if i >= 0 and c[0] <= steps[i][1] else None
        self.at[c] = t
        if t is not None:
            insort(self.by_step.setdefault(t, []), c)
            self.dirty.add(t)
        if not steps or c[0] >= steps[-1][0]:
            self.pending.add(c)

    def _unplace(self, c: Comp) -> None:
        t = self.at.pop(c, None)
        self.pending.discard(c)
        if t is not None:
            comps = self.by_step[t]
            comps.remove(c)
            if not comps:
                del self.by_step[t]
            self.dirty.add(t)

    def per_step(self, first_t0: float | None) -> dict[float, list[Any]]:
        """Each step from ``first_t0`` on (None: no step) with intervals: [exposed,
        overlapped, {pid waited for: exposed}], the steps in order."""
        pid, slots = self.pid, self.slots
        for t in self.dirty:
            comps = self.by_step.get(t)
            if not comps:
                slots.pop(t, None)
                continue
            slot: list[Any] = [0.0, 0.0, {}]
            for c0, c1, c2, c3 in comps:
                exposed = c1 - c2
                slot[0] += exposed
                slot[1] += c2 - c0
                if c3 != pid and exposed > 0:
                    by = slot[2]
                    by[c3] = by.get(c3, 0.0) + exposed
            slots[t] = slot
        self.dirty.clear()
        if first_t0 is None:
            return {}
        return {t: slots[t] for t in sorted(slots) if t >= first_t0}
