"""The collectives every rank of their group entered, with each one's arrivals, kept from
one snapshot to the next.

A live view reads the newest ~2,000 collectives three times a second, and between two
snapshots a few dozen change: finding the complete ones, their arrivals and which changed,
over the whole window each time, was the largest part left of a distributed job's
snapshot. Each collective has an ordinal, in the order its key first came (the order of
``CommReducer.colls``, whose oldest leave first): the kept ordinals are contiguous, a
window (the newest N kept) is those from one ordinal on, and the complete ones in it are a
suffix of :class:`MatchIndex`'s lists, found by bisection.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from perftop.model.comm_waits import Arrived, arrived

Key = tuple[str, int]  # (process group, its sequence number)


def desynced(by: dict[int, tuple[Any, ...]]) -> bool:
    """Whether the ranks entered different ops as one collective (``by``: pid -> record)."""
    return len({v[0] for v in by.values()}) > 1


class MatchIndex:
    """The complete collectives (each rank of the group entered it: ``need`` ranks of a
    group, 2 where it is not known) by ordinal: their keys and records, arrivals
    (:func:`arrived`) and the ordinals of those whose ranks entered different ops. A new
    ``need`` (a rank joined a group) makes a new index."""

    __slots__ = ("need", "ords", "items", "arrived", "odd")

    def __init__(self, need: dict[str, int]) -> None:
        self.need = need
        self.ords: list[int] = []
        self.items: list[tuple[Key, dict[int, tuple[Any, ...]]]] = []
        self.arrived: list[Arrived] = []
        self.odd: list[int] = []  # ordinals of the desynced, sorted

    def complete(self, key: Key, by: dict[int, tuple[Any, ...]]) -> bool:
        return len(by) >= self.need.get(key[0], 2)

    def put(self, o: int, key: Key, by: dict[int, tuple[Any, ...]]) -> None:
        """The complete collective ``key`` of ordinal ``o``, new or recorded again."""
        ords = self.ords
        i = bisect_left(ords, o)
        if i < len(ords) and ords[i] == o:
            self.items[i] = (key, by)
            self.arrived[i] = arrived(key[0], by)
        else:  # most come at the end
            ords.insert(i, o)
            self.items.insert(i, (key, by))
            self.arrived.insert(i, arrived(key[0], by))
        odd = self.odd
        j = bisect_left(odd, o)
        has = j < len(odd) and odd[j] == o
        if desynced(by):
            if not has:
                odd.insert(j, o)
        elif has:
            del odd[j]

    def drop_before(self, front: int) -> None:
        """Those of an ordinal below ``front`` out: they left the kept collectives."""
        n = bisect_left(self.ords, front)
        if n:
            del self.ords[:n], self.items[:n], self.arrived[:n]
            del self.odd[: bisect_left(self.odd, front)]

    def window(self, first: int) -> tuple[int, list[Any], list[Arrived], list[int]]:
        """Those of ordinal ``first`` on: where they start in the lists, their keys and
        records, arrivals, and where among them the desynced are."""
        ords = self.ords
        lo = bisect_left(ords, first)
        odd = [bisect_left(ords, o) - lo for o in self.odd[bisect_left(self.odd, first) :]]
        return lo, self.items[lo:], self.arrived[lo:], odd


def refreshed(
    index: MatchIndex | None,
    need: dict[str, int],
    colls: dict[Key, dict[int, tuple[Any, ...]]],
    ords: dict[Key, int],
    front: int,
    touched: set[Key],
) -> tuple[MatchIndex, list[int]]:
    """``index`` with the collectives ``touched`` (recorded since; emptied) put in where
    complete, and those of an ordinal below ``front`` (no longer kept) out; made anew of
    all ``colls`` where there is none or a group has a rank more (``need``). With the
    ordinals put in (none where made anew: whoever followed the old one starts again)."""
    put: list[int] = []
    if index is None or index.need != need:
        index = MatchIndex(need)
        for key, by in colls.items():
            if index.complete(key, by):
                index.put(ords[key], key, by)
    else:
        index.drop_before(front)
        for key in touched:
            got = colls.get(key)
            if got is not None and index.complete(key, got):
                put.append(ords[key])
                index.put(put[-1], key, got)
    touched.clear()
    return index, put
