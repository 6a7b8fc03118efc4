"""The complete collectives and their merged waits kept from one snapshot to the next
(perftop/model/comm_window.py, ``WaitMerge.follow``) against the same session made afresh
(a pickled copy keeps none of it), over generated histories of real events: collectives
of two process groups in order and late, records that come again, a rank that enters a
different op, a third rank joining a group (a collective complete before is not any more),
the kept collectives' oldest leaving (a small ``MAX_COLLS``) and the live window's (a small
``LIVE_RECORDS``), steps, and snapshots live and of the whole run at any point."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perftop.events import CollBatch, Hello, Step
from perftop.model import Session
from perftop.model import comm as comm_model
from perftop.model.steps import LIVE_WINDOW

PGS = ("default_pg", "1")
ENTERED = [(0, 1, 2)] * 4 + [(2, 0, 1), (1, 2, 0), (0, 1), (0, 1), (1,), (2,)]
BACK = [0, 0, 1, 2, 5, 9, 20, 40, 70]
ops = st.lists(
    st.one_of(
        # the next n collectives of a group, entered by these ranks in this order (mostly
        # all three; rank 2's first record makes the group one of three)
        st.tuples(st.just("new"), st.integers(0, 1), st.integers(1, 10), st.sampled_from(ENTERED)),
        # a rank's record of a collective n back (late: it had not entered; again: it had)
        # (desync: the other op of the two, so a record again can make it one op again)
        st.tuples(st.just("late"), st.integers(0, 1), st.sampled_from(BACK), st.integers(0, 2)),
        st.tuples(st.just("desync"), st.integers(0, 1), st.sampled_from(BACK), st.integers(0, 2)),
        st.tuples(st.just("step"), st.integers(0, 2), st.integers(1, 30), st.just(0)),
        st.tuples(st.just("look"), st.booleans(), st.just(0), st.just(0)),
    ),
    min_size=10,
    max_size=100,
)  # fmt: skip


def _figures(s: Session) -> list[Any]:
    return [s.snapshot(window=LIVE_WINDOW).comm, s.snapshot(window=None).comm]


def _merged(s: Session, whole: bool) -> Any:
    """Beneath the medians a snapshot shows: every wait and rank's interval merged."""
    (reducer,) = [r for r in s.reducers if isinstance(r, comm_model.CommReducer)]
    m = reducer._merges[whole]
    return m.waits, m.last_count, {p: r.comps for p, r in m.ranks.items() if r.marks}


@settings(max_examples=400, deadline=None)
@given(ops, st.sampled_from([10, 90, 4096]), st.integers(0, 40))
def test_kept_complete_collectives_give_what_a_fresh_session_gives(history, kept_n, joins):
    """(Rank 2 enters nothing in the first ``joins`` changes: a group of two till then.)"""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(comm_model, "MAX_COLLS", kept_n)
        mp.setattr(comm_model, "LIVE_RECORDS", 100)  # a live window of the newest 64
        kept = Session()
        t = 1000.0
        seq = [0, 0]
        for rank in range(3):
            kept.apply(Hello(t, 100 + rank, 1, "a", ("train.py",), rank=rank, world_size=3))
        last_step = [t, t, t]
        other: set[tuple[int, int, int]] = set()  # (group, seq, rank) of broadcast
        for n, (kind, a, b, c) in enumerate(history):
            t += 0.01
            if n < joins and kind in ("new", "late", "desync"):
                c = tuple(r for r in c if r != 2) if kind == "new" else c % 2
            if kind == "new":
                recs: dict[int, list[Any]] = {}
                for _ in range(b):
                    seq[a] += 1
                    for i, rank in enumerate(c):
                        at = t + 0.003 * ((rank + seq[a]) % 3) + 0.001 * i
                        recs.setdefault(rank, []).append(
                            (PGS[a], seq[a], "all_reduce", 64, "[[16]]", at, 1)
                        )
                    t += 0.004
                for rank, rs in recs.items():
                    kept.apply(CollBatch(t, 100 + rank, tuple(rs)))
            elif kind in ("late", "desync") and seq[a] > b:
                op = "all_reduce"
                if kind == "desync":
                    op = "all_reduce" if (a, seq[a] - b, c) in other else "broadcast"
                    other ^= {(a, seq[a] - b, c)}
                rec = (PGS[a], seq[a] - b, op, 64, "[[16]]", t - 0.002 * b, 1)
                kept.apply(CollBatch(t, 100 + c, (rec,)))
            elif kind == "step":
                t0 = max(last_step[a], t - 0.05)
                kept.apply(Step(100 + a, int(t * 1000), t0, t0 + b / 1000))
                last_step[a] = t0 + b / 1000
            elif kind == "look":
                fresh = pickle.loads(pickle.dumps(kept))  # before the kept one looks
                got = kept.snapshot(window=LIVE_WINDOW if a else None).comm
                assert got == fresh.snapshot(window=LIVE_WINDOW if a else None).comm
                if got.ranks:
                    assert _merged(kept, not a) == _merged(fresh, not a)
                (reducer,) = [r for r in kept.reducers if isinstance(r, comm_model.CommReducer)]
                index = reducer._index
                assert index is None or len(index.ords) <= len(reducer.colls) <= kept_n
                if not a:  # the collectives whose ranks entered different ops: all of them
                    need = {pg: max(2, len(m)) for pg, m in reducer.members.items()}
                    odd = [
                        k
                        for k, by in reducer.colls.items()
                        if len(by) >= need[k[0]] and len({v[0] for v in by.values()}) > 1
                    ]
                    assert [(h.pg, h.seq) for h in got.hangs if h.desync] == odd[:16]  # fmt: skip
        fresh = pickle.loads(pickle.dumps(kept))
        assert _figures(kept) == _figures(fresh)
