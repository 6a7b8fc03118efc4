"""Each rank's waits at collectives merged into intervals, kept from one snapshot to the
next: only the collectives new since the last snapshot, changed (a record of it came
again) or gone from the window are folded in or out.

A live view reads ~2,000 collectives three times a second, and between two snapshots a
few dozen change (the newest arrive, the oldest leave the window): merging every rank's
arrivals again each time was most of the monitor's work for a distributed job. A change
re-merges only the intervals around it, with the same sweep a fresh merge runs over all
arrivals (:func:`sweep`), so the figures are those of a fresh merge (see
:mod:`perftop.model.comm` for what an interval's exposed and overlapped waits are).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from operator import itemgetter
from typing import Any

from perftop.model.comm_slots import Comp, StepSlots
from perftop.model.comm_waits import Arrived

Mark = tuple[float, float, int]  # a rank's arrival, the last arrival, the pid that was last
_A = itemgetter(0)


def sweep(marks: list[Mark]) -> list[Comp]:
    """``marks`` (sorted) merged where each arrives before the interval so far ends."""
    out: list[Comp] = []
    if not marks:
        return out
    it = iter(marks)
    c0, c1, c3 = next(it)
    c2 = c0
    for a, end, who in it:
        if a <= c1:
            c2 = a
            if end > c1:
                c1, c3 = end, who
            continue
        out.append((c0, c1, c2, c3))
        c0, c1, c2, c3 = a, end, a, who
    out.append((c0, c1, c2, c3))
    return out


def _drop(items: list[Any], x: Any) -> bool:
    """``x`` out of the sorted ``items`` (the very object folded in: a value no order
    holds, a damaged writer's, is still found); whether it was there."""
    i = bisect_left(items, x)
    if i < len(items) and (items[i] is x or items[i] == x):
        del items[i]
        return True
    try:
        items.remove(x)
    except ValueError:
        return False
    return True


class RankMerge:
    """One rank's arrivals (sorted), their merged intervals (sorted by start: disjoint; an
    interval: its start, end, the rank's last arrival in it, who arrived last at the
    collective that ends it), and those by step (:class:`StepSlots`)."""

    __slots__ = ("marks", "comps", "changed", "slots")

    def __init__(self, pid: int) -> None:
        self.marks: list[Mark] = []
        self.comps: list[Comp] = []
        self.changed: list[float] = []  # the arrivals changed since the last merge
        self.slots = StepSlots(pid)

    def add(self, mark: Mark) -> None:
        insort(self.marks, mark)
        self.changed.append(mark[0])

    def remove(self, mark: Mark) -> None:
        if _drop(self.marks, mark):
            self.changed.append(mark[0])

    def merge(self) -> tuple[list[Comp], list[Comp]]:
        """The intervals made again around the arrivals changed (those gone, those made):
        for each run of changes (the newest collectives, the oldest that left), from the
        start of the interval that held its first to the end of the one that held its
        last, and on while an interval made reaches the next one kept (a fresh sweep would
        join them). Before a run nothing changed, and the interval before it ended before
        it began."""
        if not self.changed:
            return [], []
        changed = sorted(set(self.changed))
        self.changed = []
        comps, marks = self.comps, self.marks
        delta: dict[Comp, int] = {}  # +1 made, -1 gone: what changed, net
        k = 0
        while k < len(changed):
            lo = hi = changed[k]
            i = bisect_right(comps, lo, key=_A) - 1
            if i >= 0 and lo <= comps[i][1]:
                lo = comps[i][0]
            else:
                i += 1
            j = bisect_right(comps, hi, key=_A) - 1
            if j >= 0 and hi <= comps[j][1]:
                hi = max(hi, comps[j][2])
            j += 1  # comps[i:j] lie in [lo, hi], their arrivals with them
            p0 = bisect_left(marks, lo, key=_A)
            while True:
                made = sweep(marks[p0 : bisect_right(marks, hi, key=_A)])
                if not made or j >= len(comps) or comps[j][0] > made[-1][1]:
                    break
                hi = comps[j][2]  # the next one joins: its arrivals too
                j += 1
            for c in comps[i:j]:
                delta[c] = delta.get(c, 0) - 1
            for c in made:
                delta[c] = delta.get(c, 0) + 1
            comps[i:j] = made
            k = bisect_right(changed, hi, lo=k + 1)  # the changes up to hi were swept
        return [c for c, d in delta.items() if d < 0], [c for c, d in delta.items() if d > 0]


class WaitMerge:
    """Every rank's :class:`RankMerge`, and each (pid, pg, op)'s waits and how often each
    pid arrived last, over the collectives folded in (:meth:`update`)."""

    def __init__(self) -> None:
        self.applied: dict[Any, Arrived] = {}  # key -> the arrivals folded in for it
        self.order: list[Any] = []  # the keys folded in, ascending (:meth:`follow`'s)
        self.ranks: dict[int, RankMerge] = {}
        self.waits: dict[tuple[int, str, str], list[float]] = {}  # each sorted
        self.last_count: dict[int, int] = {}
        self.basis: Any = None  # the MatchIndex followed (comm_window.py)
        self.first = 0  # ... from this ordinal on
        self.pending: set[int] = set()  # ordinals of its complete ones made since

    def update(self, keys: list[Any], arrived: list[Arrived]) -> None:
        """The collectives ``keys`` (ascending; their arrivals ``arrived``) are the ones
        folded in now."""
        applied = self.applied
        for k in applied.keys() - set(keys):
            self._fold(applied.pop(k), -1)
        for k, a in zip(keys, arrived, strict=True):
            old = applied.get(k)
            if old is not a:
                if old is not None:
                    self._fold(old, -1)
                applied[k] = a
                self._fold(a, 1)
        self.order = list(keys)

    def follow(self, index: Any, first: int) -> None:
        """The complete collectives of ``index`` (a :class:`MatchIndex`) from ordinal
        ``first`` on are the ones folded in now: those that left the window out, and only
        those put since the last call (:attr:`pending`) in again, where it is the index
        followed and the window did not move back; else all of them, as :meth:`update`."""
        pending, self.pending = self.pending, set()
        if index is not self.basis or first < self.first:
            self.basis, self.first = index, first
            lo = bisect_left(index.ords, first)
            self.update(index.ords[lo:], index.arrived[lo:])
            return
        self.first = first
        applied, order = self.applied, self.order
        n = bisect_left(order, first)
        for o in order[:n]:
            self._fold(applied.pop(o), -1)
        del order[:n]
        ords = index.ords
        for o in sorted(pending):
            i = bisect_left(ords, o)
            if o < first or i == len(ords) or ords[i] != o:
                continue  # before the window, or gone from the index since
            a, old = index.arrived[i], applied.get(o)
            if old is a:
                continue
            if old is None:
                insort(order, o)
            else:
                self._fold(old, -1)
            applied[o] = a
            self._fold(a, 1)

    def _fold(self, arr: Arrived, sign: int) -> None:
        rows, last = arr
        n = self.last_count.get(last, 0) + sign
        if n:
            self.last_count[last] = n
        else:
            del self.last_count[last]
        for pid, wk, mark, w in rows:
            rank = self.ranks.get(pid)
            if rank is None:
                rank = self.ranks[pid] = RankMerge(pid)
            ws = self.waits.setdefault(wk, [])
            if sign > 0:
                rank.add(mark)
                insort(ws, w)
            else:
                rank.remove(mark)
                _drop(ws, w)
                if not ws:
                    del self.waits[wk]

    def per_step(self, pid: int, steps: Any, window: int | None) -> dict[float, list[Any]]:
        """Per step of ``pid`` in the last ``window`` of its ``steps`` ((t0, t1) in order):
        [exposed, overlapped, {pid waited for: exposed}], each interval in the step its
        start is in; the steps in order."""
        rank = self.ranks[pid]
        rank.slots.change(*rank.merge(), steps)
        n = len(steps)
        k = n if not window or window >= n else window  # as steps[-window:]
        return rank.slots.per_step(steps[n - k][0] if k else None)


def per_rank(
    merge: WaitMerge, arrived: list[Arrived], steps: dict[int, Any], window: int | None
) -> dict[int, dict[float, list[Any]]]:
    """Each rank's :meth:`WaitMerge.per_step` of the collectives folded in (``arrived``),
    the ranks in the order they first come in ``arrived`` (the straggler's sums and ties go
    by it)."""
    live = {p for p, r in merge.ranks.items() if r.marks}
    order: dict[int, None] = {}
    for rows, _last in arrived:
        for row in rows:
            if row[0] in live:
                order[row[0]] = None
        if len(order) == len(live):
            break
    return {p: merge.per_step(p, steps.get(p, ()), window) for p in order}
