"""Collectives lined up across ranks as a recording is read, for the exports: one match per
collective every rank of its group entered (by process group and sequence id, as the
session lines them up), with each rank's arrival (:func:`perftop.model.comm_waits.arrivals`)
and the last one's; what some rank never entered is given up at the end, or once
``PENDING`` newer collectives wait (the oldest first), so memory stays bounded. A group's
ranks are those the whole recording has in it (:func:`group_sizes`, read first): each rank
sends its records when it will, so a third rank's first batch may come after two others'
have matched their first collectives between themselves."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perftop.events import CollBatch, NodeScope
from perftop.model.coll_record import read_record
from perftop.model.comm_waits import arrivals
from perftop.recording import ReadStats, read_events

PENDING = 4096  # collectives waiting for their other ranks' records

# One rank's record: (op, bytes, sizes, t, 0, line, gpu, call, phase); its first seven
# fields are the session's (model/comm.py), which :func:`arrivals` reads.
Rec = tuple[Any, ...]


class Match:
    """A collective every rank entered: ``by`` each rank's record (by the caller's key),
    ``at`` its arrival, ``last`` the key of the last to arrive, ``ops`` the ops the ranks
    entered (more than one: a desync)."""

    __slots__ = ("pg", "seq", "by", "at", "last", "ops")

    def __init__(self, pg: str, seq: int, by: dict[int, Rec]) -> None:
        self.pg, self.seq, self.by = pg, seq, by
        self.at = arrivals(by)
        self.last = max(self.at, key=lambda k: self.at[k])
        self.ops = sorted({str(rec[0]) for rec in by.values()})

    def wait(self, key: int) -> float:
        """``key``'s wait for the others: the last arrival less its own."""
        return self.at[self.last] - self.at[key]


class Groups:
    """Who entered each process group's collectives, as a recording is read (a node's pid
    each): an export's first pass, beside whatever else that pass reads."""

    def __init__(self) -> None:
        self.seen: dict[str, set[tuple[str, int]]] = {}

    def add(self, node: str, ev: CollBatch) -> None:
        for c in map(read_record, ev.records):
            if c is not None and c.seq > 0:
                self.seen.setdefault(c.pg, set()).add((node, ev.pid))

    def sizes(self) -> dict[str, int]:
        return {pg: len(who) for pg, who in self.seen.items()}


def group_sizes(path: str | Path) -> dict[str, int]:
    """How many processes (a node's pid each) entered each process group's collectives
    over the whole recording."""
    groups, node = Groups(), ""
    for ev in read_events(path, ReadStats()):
        if isinstance(ev, NodeScope):
            node = ev.node
        elif isinstance(ev, CollBatch):
            groups.add(node, ev)
    return groups.sizes()


class CollMatcher:
    def __init__(
        self,
        matched: Callable[[Match], None],
        unmatched: Callable[[str, int, dict[int, Rec]], None],
        sizes: dict[str, int],
    ) -> None:
        """``sizes``: each group's ranks (:func:`group_sizes`)."""
        self.matched, self.unmatched, self.sizes = matched, unmatched, sizes
        self.pending: OrderedDict[tuple[str, int], dict[int, Rec]] = OrderedDict()
        self.members: dict[str, set[int]] = {}

    def batch(self, who: int, ev: CollBatch) -> None:
        """``ev``'s records, as rank ``who`` entered them (its pid, or a number of the
        caller's for a node's pid)."""
        for rec in ev.records:
            c = read_record(rec)
            if c is None or c.seq <= 0:
                continue  # a newer or damaged writer's; point-to-point: no sequence to line up
            pg, seq = c.pg, c.seq
            by = self.pending.setdefault((pg, seq), {})
            by[who] = (c.op, c.nbytes, c.sizes, c.t, 0, c.line, c.gpu, c.call, c.phase)
            group = self.members.setdefault(pg, set())
            group.add(who)
            if len(by) >= 2 and len(by) >= max(len(group), self.sizes.get(pg, 0)):
                self.matched(Match(pg, seq, self.pending.pop((pg, seq))))
        while len(self.pending) > PENDING:
            (pg, seq), by = self.pending.popitem(last=False)
            self.unmatched(pg, seq, by)

    def finish(self) -> None:
        """The collectives some rank never entered."""
        for (pg, seq), by in self.pending.items():
            self.unmatched(pg, seq, by)
        self.pending.clear()


def rec_args(pg: str, seq: int, rec: Rec) -> dict[str, Any]:
    """A record's figures by name, those it has: what an export writes of it."""
    op, nb, sizes, _t, _th, line, gpu, call, phase = rec
    args: dict[str, Any] = {"pg": pg, "seq": seq, "bytes": nb, "sizes": sizes}
    for k, v in (("call", call), ("phase", phase), ("line", line)):
        if v:
            args[k] = v
    if gpu is not None:
        args["gpu_s"] = gpu
    return args
