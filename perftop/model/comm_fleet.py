"""Collectives across the nodes a collector hears (``perftop collect``, ``--forward``).

Each node keeps its own session (pids repeat across hosts), so no node's model sees the
other nodes' ranks. This one reducer hears every node's comm events with each process
renamed to a number unique across nodes, and hands the figures back under their real pid
and node. The nodes' clocks must agree (NTP) for arrival times to line up: a skew between
two hosts reads as a wait.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from perftop.events import CollBatch, CollInfo, CollWaiting, Hello, SessionStart, Step
from perftop.model.comm import CommReducer
from perftop.model.comm_rows import CommStats
from perftop.model.snapshot import Meta, StepStats
from perftop.wire import StepBatch

_COMM = (Hello, CollBatch, CollWaiting, CollInfo)


class FleetComm:
    def __init__(self) -> None:
        self.reducer = CommReducer()
        self.ids: dict[tuple[str, int], int] = {}
        self.back: dict[int, tuple[str, int]] = {}

    def _uid(self, node: str, pid: int) -> int:
        uid = self.ids.get((node, pid))
        if uid is None:
            uid = self.ids[(node, pid)] = len(self.ids) + 1
            self.back[uid] = (node, pid)
        return uid

    def apply(self, node: str, ev: Any) -> None:
        """An event of ``node`` ("" = the collector's own: not a rank's)."""
        if not node:
            return
        if type(ev) is StepBatch:
            for rec in ev.records():
                self.reducer.apply(Step(self._uid(node, rec[0]), rec[1], rec[2], rec[3]))
        elif isinstance(ev, Step):
            self.reducer.apply(replace(ev, pid=self._uid(node, ev.pid)))
        elif isinstance(ev, Hello):
            self.reducer.apply(replace(ev, pid=self._uid(node, ev.pid), host=node))
        elif isinstance(ev, _COMM):
            self.reducer.apply(replace(ev, pid=self._uid(node, ev.pid)))
        elif isinstance(ev, SessionStart):  # the hang thresholds a node's perftop runs with
            self.reducer.apply(ev)

    def stats(self, ranks: tuple[StepStats, ...], meta: Meta, window: int | None) -> CommStats:
        parts: dict[str, Any] = {
            "meta": meta,
            "ranks": [
                replace(r, pid=self.ids[(r.host, r.pid)])
                for r in ranks
                if r.pid is not None and (r.host, r.pid) in self.ids
            ],  # fmt: skip
        }
        self.reducer.contribute(parts, window)
        c: CommStats = parts["comm"]

        def pid(uid: int) -> int:
            return self.back.get(uid, ("", uid))[1]

        def host(uid: int) -> str:
            return self.back.get(uid, ("", uid))[0]

        s = c.straggler
        return replace(
            c,
            ranks=tuple(replace(r, pid=pid(r.pid), host=host(r.pid)) for r in c.ranks),
            straggler=None if s is None else replace(s, pid=pid(s.pid), host=host(s.pid)),
            hangs=tuple(
                replace(
                    h, ranks=tuple(replace(x, pid=pid(x.pid), host=host(x.pid)) for x in h.ranks)
                )  # fmt: skip
                for h in c.hangs
            ),
        )
