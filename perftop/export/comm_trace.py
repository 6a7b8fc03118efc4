"""Collectives, their waits and stalled steps in the Chrome trace.

Each rank's collectives are async slices on its track (``b``/``e`` events with a local id,
``pg#seq``: a rank's collectives overlap, as DDP's buckets do, which complete events on one
thread may not), one per collective the group's ranks all entered (lined up by process
group and sequence id, as the session does; ranks that entered different ops there are a desync, so named):
from the rank's arrival to the last rank's,
its wait for the others (gloo's recorder keeps no completion time, so that is the wait; with
NCCL's times on the GPU, arrivals are read from them as in
:func:`perftop.model.comm_waits.arrivals`). A collective some rank never entered is an
instant event at its launch on a ``collectives`` thread, ``not entered by every rank``.
Each collective a rank reported still waiting (about once a second, after its first
second: a slow one, or a hang) is a ``waiting: op #seq`` async slice, as long as the
longest wait reported, with the user's line it waits at. A stalled step or pass (the
stacks dumped while it stalled) is an instant event on its process with each process's
stack, innermost frame first, and where it stood.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol

from perftop.events import CollBatch, CollWaiting, StallCapture
from perftop.export.coll_match import CollMatcher, Match, Rec, rec_args
from perftop.fmt import stall_words
from perftop.model.stacks import where

WAITS = 4096  # the longest wait reported of each collective still waiting, kept to the end
COLL_TID = (1 << 30) + 100  # the instants' thread on a rank's track (above any Linux tid)


class Trace(Protocol):
    """What this needs of :class:`perftop.export.chrome.ChromeTrace`."""

    def track(self, pid: int) -> int: ...

    def us(self, t: float) -> float: ...

    def emit(self, ev: dict[str, Any]) -> None: ...

    def thread(self, track: int, tid: int, name: str) -> None: ...


class CommTrack:
    def __init__(self, tr: Trace, sizes: dict[str, int]) -> None:
        """``sizes``: each process group's ranks over the recording (``group_sizes``)."""
        self.tr = tr
        self.colls = CollMatcher(self._matched, self._unmatched, sizes)  # by trace pid
        self.waits: OrderedDict[tuple[int, str, int], CollWaiting] = OrderedDict()

    def batch(self, ev: CollBatch) -> None:
        self.colls.batch(self.tr.track(ev.pid), ev)

    def waiting(self, ev: CollWaiting) -> None:
        key = (self.tr.track(ev.pid), ev.pg, ev.seq)
        old = self.waits.pop(key, None)
        self.waits[key] = ev if old is None or ev.waited_s >= old.waited_s else old
        while len(self.waits) > WAITS:
            self._wait(*self.waits.popitem(last=False))

    def stall(self, ev: StallCapture) -> None:
        what, how = stall_words(ev.step, ev.pid, ev.stalled_s, ev.median_s, ev.during)
        stacks = {
            f"{role} {pid}": {"where": where(frames),
                              "frames": [f"{file}:{line} {fn}" for fn, file, line in frames]}
            for pid, role, frames in ev.stacks
        }  # fmt: skip
        args: dict[str, Any] = {"stalled": how, "stacks": stacks}
        if ev.note:
            args["note"] = ev.note
        tp = self.tr.track(ev.pid)
        self.tr.emit({"ph": "i", "s": "p", "name": f"stalled: {what}", "cat": "stall",
                      "pid": tp, "tid": tp, "ts": self.tr.us(ev.t), "args": args})  # fmt: skip

    def finish(self) -> None:
        """What is left: the collectives not every rank entered, and each wait seen."""
        self.colls.finish()
        for key, ev in self.waits.items():
            self._wait(key, ev)

    def _matched(self, m: Match) -> None:
        for tp, rec in m.by.items():
            args = rec_args(m.pg, m.seq, rec)
            args["wait_for_others_s"] = round(m.wait(tp), 6)
            args["last_to_arrive"] = tp == m.last
            name = rec[0]
            if len(m.ops) > 1:
                name, args["desync"] = f"{rec[0]} (desync)", m.ops
            self._span(tp, f"{m.pg}#{m.seq}", name, m.at[tp], m.at[m.last], args)

    def _unmatched(self, pg: str, seq: int, by: dict[int, Rec]) -> None:
        for tp, rec in by.items():
            self.tr.thread(tp, COLL_TID, "collectives")
            self.tr.emit({"ph": "i", "s": "t", "name": f"{rec[0]} (not entered by every rank)",
                          "cat": "collective", "pid": tp, "tid": COLL_TID,
                          "ts": self.tr.us(rec[3]), "args": rec_args(pg, seq, rec)})  # fmt: skip

    def _wait(self, key: tuple[int, str, int], ev: CollWaiting) -> None:
        tp = key[0]
        args = {"pg": ev.pg, "seq": ev.seq, "sizes": ev.sizes, "waited_s": ev.waited_s,
                "line": ev.line}  # fmt: skip
        end = ev.t_created + max(0.0, ev.waited_s)
        self._span(tp, f"waiting {ev.pg}#{ev.seq}", f"waiting: {ev.op} #{ev.seq}",
                   ev.t_created, end, args)  # fmt: skip

    def _span(
        self, tp: int, key: str, name: str, t0: float, t1: float, args: dict[str, Any]
    ) -> None:
        """An async slice on ``tp``'s track: its begin, with ``args``, and its end."""
        ids = {"cat": "collective", "pid": tp, "tid": tp, "id2": {"local": key}, "name": name}
        self.tr.emit({"ph": "b", **ids, "ts": self.tr.us(t0), "args": args})
        self.tr.emit({"ph": "e", **ids, "ts": self.tr.us(max(t0, t1))})
