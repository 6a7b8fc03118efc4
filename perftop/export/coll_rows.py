"""``collectives.csv``: one row per rank per collective, lined up across ranks as the
Chrome trace's are (:mod:`perftop.export.coll_match`): its arrival, its wait for the others
(the last arrival less its own: gloo keeps no completion time), whether it came last, and
what the recorder says of it. A collective some rank never entered has its rows with an
empty wait and ``entered_by_all`` 0; ranks that entered different ops at one sequence id
(a desync) have them in ``desync_ops``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perftop.events import CollBatch
from perftop.export.coll_match import CollMatcher, Match, Rec

COLL_COLUMNS = (
    *("pid", "rank", "host", "pg", "seq", "op", "t_s", "wait_for_others_s", "last_to_arrive"),
    *("entered_by_all", "desync_ops", "bytes", "sizes", "call", "phase", "line", "gpu_s"),
)


class CollRows:
    def __init__(
        self,
        write: Callable[[tuple[Any, ...]], None],
        rel: Callable[[float], float],
        rank: Callable[[int], int | None],
        sizes: dict[str, int],
    ) -> None:
        """``write`` a row; ``rel`` a time since the session's start; ``rank`` a pid's;
        ``sizes`` each process group's ranks (``group_sizes``)."""
        self.write, self.rel, self.rank = write, rel, rank
        self.keys: dict[tuple[str, int], int] = {}  # (host, pid): pids may repeat on nodes
        self.who: list[tuple[str, int]] = []
        self.match = CollMatcher(self._matched, self._unmatched, sizes)
        self.rows = 0

    def batch(self, node: str, ev: CollBatch) -> None:
        """``ev``'s records, of ``ev.pid`` on host ``node``."""
        key = self.keys.get((node, ev.pid))
        if key is None:
            key = self.keys[(node, ev.pid)] = len(self.who)
            self.who.append((node, ev.pid))
        self.match.batch(key, ev)

    def finish(self) -> None:
        self.match.finish()

    def _matched(self, m: Match) -> None:
        desync = " ".join(m.ops) if len(m.ops) > 1 else ""
        for key, rec in m.by.items():
            self._row(key, m.pg, m.seq, rec, m.at[key], round(m.wait(key), 6),
                      int(key == m.last), 1, desync)  # fmt: skip

    def _unmatched(self, pg: str, seq: int, by: dict[int, Rec]) -> None:
        for key, rec in by.items():
            self._row(key, pg, seq, rec, rec[3], "", "", 0, "")

    def _row(
        self, key: int, pg: str, seq: int, rec: Rec, t: float, wait: Any, last: Any,
        everyone: int, desync: str,
    ) -> None:  # fmt: skip
        node, pid = self.who[key]
        op, nb, sizes, _t, _th, line, gpu, call, phase = rec
        rank = self.rank(pid)
        self.write((pid, "" if rank is None else rank, node, pg, seq, op, self.rel(t), wait,
                    last, everyone, desync, nb, sizes, call, phase, line,
                    "" if gpu is None else gpu))  # fmt: skip
        self.rows += 1
