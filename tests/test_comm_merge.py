"""The waits at collectives merged incrementally (perftop/model/comm_merge.py, comm_slots.py)
against two oracles, over generated histories: collectives coming in (most at the newest
end, some late), leaving the window, recorded again with other times; steps arriving
after the collectives they hold. After each change the kept merge must give what a merge
made afresh gives, and what the plain merge below (the model's before it kept anything)
gives, figure for figure."""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from perftop.model.comm_merge import WaitMerge, per_rank
from perftop.model.comm_waits import arrived


def plain(seen: list[Any], steps: dict[int, Any], window: int | None) -> Any:
    """Every rank's arrivals sorted and merged from scratch, each interval in the step its
    start is in (the window's last ``window`` steps): the oracle."""
    marks: dict[int, list[Any]] = {}
    waits: dict[Any, list[float]] = {}
    last: dict[int, int] = {}
    for rows, who in seen:
        last[who] = last.get(who, 0) + 1
        for pid, wk, mark, w in rows:
            marks.setdefault(pid, []).append(mark)
            waits.setdefault(wk, []).append(w)
    out = {}
    for pid, arr in marks.items():
        st_ = list(steps.get(pid, ()))
        if window is not None:
            st_ = st_[-window:]
        starts = [s[0] for s in st_]
        per: dict[float, list[Any]] = {}
        comp: list[Any] | None = None
        for a, end, who in [*sorted(arr), (float("inf"), float("inf"), -1)]:
            if comp is not None and a <= comp[1]:
                comp[2] = a
                if end > comp[1]:
                    comp[1], comp[3] = end, who
                continue
            if comp is not None:
                i = bisect_right(starts, comp[0]) - 1
                if i >= 0 and comp[0] <= st_[i][1]:
                    slot = per.setdefault(st_[i][0], [0.0, 0.0, {}])
                    exposed = comp[1] - comp[2]
                    slot[0] += exposed
                    slot[1] += comp[2] - comp[0]
                    if comp[3] != pid and exposed > 0:
                        slot[2][comp[3]] = slot[2].get(comp[3], 0.0) + exposed
            comp = [a, end, a, who]
        out[pid] = dict(sorted(per.items()))
    return out, {k: sorted(v) for k, v in waits.items()}, last


def _coll(times: dict[int, float]) -> Any:
    by = {pid: ("all_reduce", 4, "[1]", t, 1, "", None) for pid, t in times.items()}
    return arrived("default_pg", by)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("new"), st.integers(0, 5), st.lists(st.integers(0, 60), min_size=3, max_size=3)),
        st.tuples(st.just("late"), st.integers(0, 30), st.lists(st.integers(0, 60), min_size=3, max_size=3)),
        st.tuples(st.just("again"), st.integers(0, 30), st.lists(st.integers(0, 60), min_size=3, max_size=3)),
        st.tuples(st.just("drop"), st.integers(1, 6), st.just([])),
        st.tuples(st.just("step"), st.integers(1, 40), st.lists(st.integers(0, 30), min_size=2, max_size=2)),
        st.tuples(st.just("look"), st.sampled_from([None, 3, 8, 1000]), st.just([])),
    ),
    min_size=1,
    max_size=60,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(ops)
def test_the_kept_merge_gives_what_a_fresh_merge_and_the_plain_one_give(history):
    pids = (101, 102, 103)
    window: dict[Any, Any] = {}  # key -> Arrived, oldest first: what the snapshot reads
    steps: dict[int, deque[tuple[float, float]]] = {p: deque(maxlen=24) for p in pids}
    now, seq = 0.0, 0
    kept = WaitMerge()
    for kind, n, xs in history:
        if kind == "new":  # the newest collectives, each rank up to 60 ms apart
            for _ in range(n % 3 + 1):
                seq += 1
                now += (0.005, 0.03, 0.08)[n // 2]  # overlapping or apart
                window[("default_pg", seq)] = _coll({p: now + x / 1000 for p, x in zip(pids, xs)})
        elif kind in ("late", "again") and window:
            keys = list(window)
            key = keys[max(0, len(keys) - 1 - n)]
            # late: an older collective matched only now (new to the merge); again: a
            # record of one came again (the same key, other times)
            t = now - n * 0.01
            if kind == "late":
                del window[key]
                seq += 1
                key = ("default_pg", -seq)
            window[key] = _coll({p: t + x / 1000 for p, x in zip(pids, xs)})
        elif kind == "drop":
            for key in list(window)[:n]:
                del window[key]
        elif kind == "step":  # each rank's next step, after its last
            for p, x in zip(pids, xs):
                t0 = steps[p][-1][1] + x / 1000 if steps[p] else now - 0.2 + x / 1000
                steps[p].append((t0, t0 + n / 1000))
        keys, seen = list(window), list(window.values())
        w = n if kind == "look" else 1000
        kept.update(keys, seen)
        got = per_rank(kept, seen, steps, w)
        fresh = WaitMerge()
        fresh.update(keys, seen)
        assert got == per_rank(fresh, seen, steps, w)
        want, waits, last = plain(seen, steps, w)
        assert got == want
        assert kept.waits == waits and kept.last_count == last
        assert fresh.waits == waits and fresh.last_count == last


def test_records_with_no_clock_time_are_left_out_and_every_snapshot_answers():
    """A damaged writer's records (a time of nan or inf; a GPU time of inf) among those of
    collectives every rank entered: the model leaves the records without a time out (a GPU
    time of inf reads as none), and every snapshot gives the figures of the same run
    without them (a nan once sat unsorted in the kept merge)."""
    from perftop.events import CollBatch
    from perftop.model import Session
    from tests.hang_events import hang_events

    rec = ("default_pg", 5, "all_reduce", 64, "[[16]]", 1000.4, 1, "", "", "")
    damaged = (("default_pg", 3, "all_reduce", 64, "[[16]]", float("nan"), 1),
               ("default_pg", 4, "all_reduce", 64, "[[16]]", float("inf"), 1),
               (*rec, float("inf")))  # fmt: skip

    def figures(rank0: tuple[Any, ...], rank1: tuple[Any, ...]) -> list[Any]:
        evs, _ = hang_events(1.0)
        s = Session()
        out = []
        for ev in evs:
            if isinstance(ev, CollBatch):
                keep = tuple(r for r in ev.records if r[1] not in (3, 4, 5))
                ev = CollBatch(ev.t, ev.pid, keep + (rank1 if ev.pid % 2 else rank0))
            s.apply(ev)
            out += [s.snapshot().comm, s.snapshot(window=None).comm]
        return out

    bad, good = figures(damaged, damaged[:2]), figures((rec,), ())
    assert bad == good
    assert good[-1].ranks[0].steps == 7  # seqs 1, 2 and 6-10: each rank entered them
