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
from perftop.fmt import stall_words
from perftop.model.comm_waits import arrivals
from perftop.model.stacks import where

PENDING = 4096  # collectives waiting for their other ranks' records (oldest given up first)
WAITS = 4096  # the longest wait reported of each collective still waiting, kept to the end
COLL_TID = (1 << 30) + 100  # the instants' thread on a rank's track (above any Linux tid)


class Trace(Protocol):
    """What this needs of :class:`perftop.export.chrome.ChromeTrace`."""

    def track(self, pid: int) -> int: ...

    def us(self, t: float) -> float: ...

    def emit(self, ev: dict[str, Any]) -> None: ...

    def thread(self, track: int, tid: int, name: str) -> None: ...


class CommTrack:
    def __init__(self, tr: Trace) -> None:
        self.tr = tr
        # (pg, seq) -> trace pid -> (op, bytes, sizes, t, thread, line, gpu, call, phase)
        self.pending: OrderedDict[tuple[str, int], dict[int, tuple[Any, ...]]] = OrderedDict()
        self.members: dict[str, set[int]] = {}
        self.waits: OrderedDict[tuple[int, str, int], CollWaiting] = OrderedDict()

    def batch(self, ev: CollBatch) -> None:
        tp = self.tr.track(ev.pid)
        for rec in ev.records:
            try:
                pg, seq, op, nb, sizes, t = rec[:6]
                pg, seq, op, nb, t = str(pg), int(seq), str(op), int(nb), float(t)
            except (TypeError, ValueError):
                continue  # a record of a newer or damaged writer
            if seq <= 0:
                continue  # point-to-point: no group-wide sequence to line up
            gpu = rec[10] if len(rec) > 10 else None
            gpu = float(gpu) if isinstance(gpu, (int, float)) and gpu >= 0 else None
            call, phase, line = (list(map(str, rec[7:10])) + ["", "", ""])[:3]
            by = self.pending.setdefault((pg, seq), {})
            by[tp] = (op, nb, str(sizes), t, 0, line, gpu, call, phase)
            self.members.setdefault(pg, set()).add(tp)
            if len(by) >= 2 and len(by) >= len(self.members[pg]):
                self._matched(pg, seq, self.pending.pop((pg, seq)))
        while len(self.pending) > PENDING:
            (pg, seq), by = self.pending.popitem(last=False)
            self._unmatched(pg, seq, by)

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
        for (pg, seq), by in self.pending.items():
            self._unmatched(pg, seq, by)
        for key, ev in self.waits.items():
            self._wait(key, ev)

    def _matched(self, pg: str, seq: int, by: dict[int, tuple[Any, ...]]) -> None:
        at = arrivals(by)
        last = max(at, key=lambda p: at[p])
        ops = sorted({str(rec[0]) for rec in by.values()})  # more than one: a desync
        for tp, rec in by.items():
            args = _args(pg, seq, rec)
            args["wait_for_others_s"] = round(at[last] - at[tp], 6)
            args["last_to_arrive"] = tp == last
            name = rec[0]
            if len(ops) > 1:
                name, args["desync"] = f"{rec[0]} (desync)", ops
            self._span(tp, f"{pg}#{seq}", name, at[tp], at[last], args)

    def _unmatched(self, pg: str, seq: int, by: dict[int, tuple[Any, ...]]) -> None:
        for tp, rec in by.items():
            self.tr.thread(tp, COLL_TID, "collectives")
            self.tr.emit({"ph": "i", "s": "t", "name": f"{rec[0]} (not entered by every rank)",
                          "cat": "collective", "pid": tp, "tid": COLL_TID,
                          "ts": self.tr.us(rec[3]), "args": _args(pg, seq, rec)})  # fmt: skip

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


def _args(pg: str, seq: int, rec: tuple[Any, ...]) -> dict[str, Any]:
    op, nb, sizes, _t, _th, line, gpu, call, phase = rec
    args: dict[str, Any] = {"pg": pg, "seq": seq, "bytes": nb, "sizes": sizes}
    for k, v in (("call", call), ("phase", phase), ("line", line)):
        if v:
            args[k] = v
    if gpu is not None:
        args["gpu_s"] = gpu
    return args
