"""Collectives across ranks: who waits, for whom, and which collective hangs.

Each rank's hook sends the collectives it entered, with the time it entered each (c10d's
flight recorder's creation time, on the system clock). A collective completes no earlier
than its last rank arrives, so for each collective every rank entered, a rank's *wait* is
``last arrival - its arrival``, and the rank that arrived last is the one it waited for.

A rank's waits are merged into intervals: where it launched another collective before an
earlier one could complete (DDP's buckets), it went on working: *overlapped*; from its
last launch in an interval to the interval's end it had nothing left to launch: *exposed*
(gloo's recorder keeps no completion time: the transfer itself is not in it). Per step,
the exposed and overlapped sums give ``wait_s`` and ``overlap_s`` (medians). Pure.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any

from perftop.events import CollBatch, CollInfo, CollWaiting, Hello, SessionStart, Step
from perftop.model.coll_record import read_record
from perftop.model.comm_merge import WaitMerge, per_rank
from perftop.model.comm_rows import CollRow, CommStats, HangRank, HangRow, RankComm
from perftop.model.comm_sites import Sites
from perftop.model.comm_waits import Arrived, _straggler
from perftop.model.comm_window import MatchIndex, desynced, refreshed
from perftop.model.hang_env import hang_env, positive
from perftop.model.stats import median, percentile
from perftop.wire import StepRecord

MAX_COLLS = 4096  # (pg, seq) keys kept (the whole-run report reads them all)
LIVE_RECORDS = 4096  # a live snapshot's newest (collective, rank) records, >= 64 collectives
MAX_STEPS = 2048  # step intervals kept per process that makes collectives
# ... and per process before it is known to have ranks (its Hello's world size: torchrun's
# from the start, a spawned rank's once its group is made; or its first records): a job
# with one process never makes any, and 2,048 spans were a third of every replay
# checkpoint of it
EARLY_STEPS = 256
MAX_WAITING = 64
ONGOING_S = 3.0  # a waiting collective's last report is at most this old: still waiting
DEFAULT_PGS = ("default_pg", "0")


HANG_FACTOR = 10.0  # a collective hangs after this many times the op's p95 wait ...
HANG_AFTER_S = 10.0  # ... and at least this long
# Where this process's environment sets them, they win over those a session was run with
# (its SessionStart's): a reader may judge a recording again with thresholds of its own.
ENV_HANG_FACTOR, ENV_HANG_AFTER_S = hang_env()


class CommReducer:
    handles = (Hello, Step, CollBatch, CollWaiting, CollInfo, SessionStart)

    def __init__(self) -> None:
        # (times the p95, at least seconds): this reader's environment's, else the session's
        self.hang_at = (ENV_HANG_FACTOR or HANG_FACTOR, ENV_HANG_AFTER_S or HANG_AFTER_S)
        self.who: dict[int, tuple[int | None, str]] = {}
        self.steps: dict[int, deque[tuple[float, float]]] = {}
        self.first: dict[int, float] = {}  # each process's first step's start (never dropped)
        # (pg, seq) -> pid -> (op, bytes, sizes, t, thread)
        self.colls: OrderedDict[tuple[str, int], dict[int, tuple[Any, ...]]] = OrderedDict()
        self.members: dict[str, set[int]] = {}
        self.kinds: dict[int, dict[tuple[str, str], list[Any]]] = {}  # count, bytes, thread
        self.last: dict[tuple[int, str], tuple[int, str]] = {}  # (pid, pg) -> (seq, op)
        self.waiting: OrderedDict[tuple[str, int], dict[int, CollWaiting]] = OrderedDict()
        self.lost: dict[int, int] = {}
        self.why: dict[int, str] = {}
        self.sites = Sites()
        self.last_t = 0.0
        self._kept()

    def _kept(self) -> None:
        """What is kept from one snapshot to the next (made again after a pickle): each
        key's ordinal (comm_window.py), the keys recorded since the last snapshot, the
        complete collectives, and the waits merged at the last live (False) and whole-run
        (True) snapshot."""
        self._ord = {k: i for i, k in enumerate(self.colls)}
        self._next = len(self.colls)
        self._touched: set[tuple[str, int]] = set()
        self._index: MatchIndex | None = None
        self._merges: dict[bool, WaitMerge] = {}

    def __getstate__(self) -> dict[str, Any]:
        kept = ("_ord", "_next", "_touched", "_index", "_merges")
        return {k: v for k, v in self.__dict__.items() if k not in kept}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._kept()

    def apply_steps(self, records: Sequence[StepRecord]) -> None:
        """Each step's span, from packed records (no :class:`Step` made of each: a tight
        loop's 4,700 steps a second made this reducer a tenth of the monitor's ingest)."""
        steps, last = self.steps, self.last_t
        for pid, _index, t0, t1, *_ in records:
            d = steps.get(pid)
            if d is None:
                d = steps[pid] = deque(maxlen=EARLY_STEPS)
                self.first[pid] = t0
            d.append((t0, t1))
            if t1 > last:
                last = t1
        self.last_t = last

    def apply(self, ev: Any) -> None:
        if isinstance(ev, Step):
            self.apply_steps(((ev.pid, ev.index, ev.t0, ev.t1, 0.0, 0.0, 0.0, 0),))
        elif isinstance(ev, CollBatch):
            self._distributed(ev.pid)
            self._records(ev)
        elif isinstance(ev, CollWaiting):
            w = self.waiting.setdefault((ev.pg, ev.seq), {})
            w[ev.pid] = ev
            while len(self.waiting) > MAX_WAITING:
                self.waiting.popitem(last=False)
            self.last_t = max(self.last_t, ev.t)
        elif isinstance(ev, Hello):
            if ev.worker_id is None:
                self.who[ev.pid] = (ev.rank, ev.host)
                if (ev.world_size or 0) > 1:  # torchrun's, or rank_watch's once the group is made
                    self._distributed(ev.pid)
        elif isinstance(ev, CollInfo):
            self._distributed(ev.pid)
            if ev.why:
                self.why[ev.pid] = ev.why
        elif isinstance(ev, SessionStart):
            self.hang_at = (
                ENV_HANG_FACTOR or positive(ev.hang_factor) or HANG_FACTOR,
                ENV_HANG_AFTER_S or positive(ev.hang_after_s) or HANG_AFTER_S,
            )

    def _distributed(self, pid: int) -> None:
        """``pid`` makes collectives: its steps' spans are kept as long as its records
        may need them."""
        d = self.steps.get(pid)
        if d is None or d.maxlen != MAX_STEPS:
            self.steps[pid] = deque(d or (), maxlen=MAX_STEPS)

    def _records(self, ev: CollBatch) -> None:
        self.lost[ev.pid] = ev.lost
        self.last_t = max(self.last_t, ev.t)
        kinds = self.kinds.setdefault(ev.pid, {})
        for rec in ev.records:
            c = read_record(rec)
            if c is None:
                continue  # a record of a newer or damaged writer
            pg, seq, op, nb, t, th = c.pg, c.seq, c.op, c.nbytes, c.t, c.thread
            k = kinds.setdefault((pg, op), [0, 0, False])
            k[0] += 1
            k[1] += nb
            k[2] = k[2] or bool(th)
            self.sites.add(ev.pid, pg, op, nb, t, th, (c.call, c.phase, c.line))
            if seq <= 0:
                continue  # point-to-point: no group-wide sequence to line up
            key = (pg, seq)
            by = self.colls.get(key)
            if by is None:
                by = self.colls[key] = {}
                self._ord[key] = self._next
                self._next += 1
            by[ev.pid] = (op, nb, c.sizes, t, th, c.line, c.gpu)
            self._touched.add(key)
            self.members.setdefault(pg, set()).add(ev.pid)
            self.last[(ev.pid, pg)] = (seq, op)
        while len(self.colls) > MAX_COLLS:  # (what is touched stays bounded by it too)
            gone = self.colls.popitem(last=False)[0]
            del self._ord[gone]
            self._touched.discard(gone)

    def _complete(self) -> MatchIndex:
        """The :class:`MatchIndex` of now (:func:`refreshed`), each merge told which
        collectives were put in since."""
        need = {pg: max(2, len(m)) for pg, m in self.members.items()}
        front = self._next - len(self.colls)
        index, put = refreshed(self._index, need, self.colls, self._ord, front, self._touched)
        self._index = index
        for merge in self._merges.values():
            if len(merge.pending) > MAX_COLLS:  # not looked at for long: all again, once
                merge.basis = None
                merge.pending.clear()
            else:
                merge.pending.update(put)
        return index

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        if not self.kinds and not self.waiting and not self.why:
            parts["comm"] = CommStats()
            return
        index = self._complete()
        # the newest LIVE_RECORDS records' collectives (None: all kept) by their ordinals
        limit = None if window is None else max(64, LIVE_RECORDS // max(2, len(self.kinds)))
        first = self._next - len(self.colls)
        if limit and limit < len(self.colls):
            first = self._next - limit
        _lo, matched, seen, odd = index.window(first)
        step_p50 = {r.pid: r.p50 for r in parts.get("ranks", ()) if r.pid is not None}
        ended = bool(getattr(parts.get("meta"), "ended", False))
        self.sites.resolve(self.steps, ended, self.first)
        merge = self._merges.get(window is None)
        if merge is None:
            merge = self._merges[window is None] = WaitMerge()
        merge.follow(index, first)
        per_pid = per_rank(merge, seen, self.steps, window)
        waits, last_count = merge.waits, merge.last_count
        ranks = []
        for pid in sorted(self.kinds, key=lambda p: (self.who.get(p, (None, ""))[0] or 0, p)):
            rank, host = self.who.get(pid, (None, ""))
            steps = per_pid.get(pid, {})
            exposed, overlap = [v[0] for v in steps.values()], [v[1] for v in steps.values()]
            wait, p50 = median(exposed), step_p50.get(pid)
            by: dict[int, list[float]] = {}  # rank waited for: [steps it was the most, wait]
            for v in steps.values():
                if v[2]:
                    by.setdefault(max(v[2], key=v[2].__getitem__), [0.0, 0.0])[0] += 1
                for q, w in v[2].items():
                    by.setdefault(q, [0.0, 0.0])[1] += w
            rows = tuple(
                CollRow(pg, op, k[0], k[1], median(waits.get((pid, pg, op), [])), k[2],
                        self.sites.rows(pid, pg, op))
                for (pg, op), k in sorted(self.kinds[pid].items(), key=lambda x: -x[1][1])
            )  # fmt: skip
            ranks.append(RankComm(
                pid, rank, host, rows, len(steps), wait, median(overlap),
                wait / p50 if wait is not None and p50 else None,
                self.who.get(max(by, key=lambda q: by[q]), (None, ""))[0] if by else None,
                self.lost.get(pid, 0),
            ))  # fmt: skip
        parts["comm"] = CommStats(
            tuple(ranks),
            _straggler(per_pid, last_count, len(matched), step_p50, self.who),
            self._hangs(matched, seen, odd, ended),
            "; ".join(sorted(set(self.why.values()))) if not matched else "",
        )

    def _hangs(
        self, matched: list[Any], arrived: list[Arrived], odd: list[int], ended: bool
    ) -> tuple[HangRow, ...]:
        """``arrived``, ``odd``: the ``matched`` collectives' (:meth:`MatchIndex.window`)."""
        rows = []
        seen = set()
        for key, by in self.waiting.items():
            first = next(iter(by.values()))
            latest = max(w.t for w in by.values())
            ongoing = not ended and self.last_t - latest <= ONGOING_S
            waited = max(w.waited_s for w in by.values()) + (
                max(0.0, self.last_t - latest) if ongoing else 0.0
            )
            typical = percentile(sorted(self._usual(key[0], first.op, matched, arrived)), 95.0)
            factor, at_least = self.hang_at
            threshold = max(factor * (typical or 0.0), at_least)
            desync = desynced(self.colls.get(key, {}))
            if waited < threshold and not desync:
                continue
            seen.add(key)
            seen_t = first.t_created + threshold  # entered after this: missing at the hang
            rows.append(HangRow(key[0], key[1], first.op, first.sizes, first.t_created,
                                round(waited, 3), threshold, self._where(key, by, seen_t),
                                desync, ongoing))  # fmt: skip
        for key, by in (matched[n] for n in odd):
            if key not in seen and len(rows) < 16:
                v = next(iter(by.values()))
                rows.append(HangRow(key[0], key[1], v[0], v[2], v[3], 0.0, 0.0,
                                    self._where(key, {}), True, False))  # fmt: skip
        return tuple(rows)

    def _usual(self, pg: str, op: str, matched: list[Any], arrived: list[Arrived]) -> list[float]:
        """The waits of ``op`` in ``pg`` at collectives that never hung (their usual time)."""
        out = []
        for (key, _by), (rows, _last) in zip(matched, arrived, strict=True):
            if key[0] == pg and key not in self.waiting:
                out += [w for _pid, wk, _mark, w in rows if wk[2] == op]
        return out

    def _where(
        self, key: tuple[str, int], waiting: dict[int, CollWaiting], by_t: float | None = None
    ) -> tuple[HangRank, ...]:
        """Each rank of the group: entered (by ``by_t``, when the hang was seen) or not."""
        pg, seq = key
        group = set(self.members.get(pg, set()))
        if pg in DEFAULT_PGS:
            group |= {p for p, (r, _h) in self.who.items() if r is not None}
        entered = self.colls.get(key, {})
        out = []
        for pid in sorted(group, key=lambda p: (self.who.get(p, (None, ""))[0] or 0, p)):
            rank = self.who.get(pid, (None, ""))[0]
            e = entered.get(pid)
            w = waiting.get(pid)
            if w is not None or (e is not None and (by_t is None or e[3] <= by_t)):
                op, line = (e[0], e[5]) if e is not None else ("", "")
                if w is not None:  # the line that launched it, else the one it waits at
                    op, line = op or w.op, line or w.line
                out.append(HangRank(rank, pid, True, op, line))
                continue
            last = next(((s, self.colls[(pg, s)][pid][0]) for s in range(seq - 1, seq - 65, -1)
                         if pid in self.colls.get((pg, s), {})), None)  # fmt: skip
            out.append(HangRank(rank, pid, False, "", "", last[0] if last else None,
                                last[1] if last else ""))  # fmt: skip
        return tuple(out)
