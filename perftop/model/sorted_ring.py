"""The live window's columns kept sorted between snapshots, for their percentiles.

A snapshot of a full ring (:data:`~perftop.model.steps.LIVE_WINDOW` steps) sorted each of
its six columns again: 0.23 ms a process a snapshot, the most of what ``stats()`` cost.
Between two snapshots only the steps that came since changed (ten or so in a job of 20
steps a second): each column's sorted copy drops the value a new step overwrote in the ring
and takes the new one, two binary searches and a move of a few KB each: 0.08 ms in all for
ten steps, as much as a whole sort for fifty. Where more than 1/:data:`RESORT_SHARE` of
the ring is new (a tight loop's thousands of steps a second), or a value overwritten is not
where a sorted copy has it (a NaN compares with nothing), the columns are sorted whole, as
before. Adding a step costs nothing more: the work is done at the snapshot.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, insort
from collections.abc import Sequence

RESORT_SHARE = 20  # more than 1/20 of the ring new since the last snapshot: sorted whole


class SortedRing:
    """Sorted copies of a ring's columns (entry ``i % size`` holds step ``i``), brought up to
    date from the ring itself at each :meth:`sorted` call."""

    __slots__ = ("size", "_sorted", "_seen", "_at")

    def __init__(self, size: int) -> None:
        self.size = size
        self._sorted: list[list[float]] = []
        self._seen: tuple[array[float], ...] = ()  # the ring as last sorted
        self._at = -1  # the count of steps then (-1: never)

    def sorted(self, columns: Sequence[Sequence[float]], count: int) -> list[list[float]]:
        """Each column sorted; ``columns`` hold ``min(count, size)`` entries of a ring
        into which ``count`` steps were written in all."""
        new = count - self._at
        if (
            self._at < self.size  # the ring was not full then: nothing was overwritten
            or count < self.size
            or new * RESORT_SHARE > self.size
            or len(self._seen) != len(columns)
            or not self._update(columns, count)
        ):
            self._sorted = [sorted(c) for c in columns]
            self._seen = tuple(array("d", c) for c in columns)
        self._at = count
        return self._sorted

    def _update(self, columns: Sequence[Sequence[float]], count: int) -> bool:
        """The steps since the last call, in place; False where a sorted copy does not hold
        a value the ring held (it must be sorted whole)."""
        size = self.size
        for j in range(self._at, count):
            i = j % size
            for s, seen, col in zip(self._sorted, self._seen, columns):
                old, cur = seen[i], col[i]
                k = bisect_left(s, old)
                if k == len(s) or s[k] != old:
                    return False
                del s[k]
                insort(s, cur)
                seen[i] = cur
        return True
