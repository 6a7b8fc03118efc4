"""The live window's percentiles from columns kept sorted between snapshots
(perftop/model/sorted_ring.py) are those of the ring sorted afresh, whatever comes: steps
a few at a time or thousands between two snapshots, values tied, -0.0 (a data wait not
seen). A time that is not finite never reaches the model (the wire rejects its frame); the
sorted copies still hold against a NaN, which compares with nothing."""

from __future__ import annotations

import math
import pickle
from array import array

from hypothesis import given, settings
from hypothesis import strategies as st

from perftop.model.sorted_ring import SortedRing
from perftop.model.stats import percentile
from perftop.model.step_stats import step_stats
from perftop.model.steps import LIVE_WINDOW, StepSeries

VALUES = st.one_of(
    st.floats(0.0, 2.0, allow_nan=False),
    st.sampled_from([0.0, -0.0, 0.001, 0.001, 0.5]),  # ties, the unseen wait's sign
)


def _same(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))


def _fresh(series: StepSeries) -> list[float | None]:
    """The figures of the whole ring, each column sorted afresh."""
    cols = [sorted(c) for c in series.columns()]
    return [percentile(cols[0], 95)] + [percentile(c, 50) for c in cols]


def _cached(series: StepSeries) -> list[float | None]:
    cols = series.sorted_ring.sorted(series.columns(), series.count)
    return [percentile(cols[0], 95)] + [percentile(c, 50) for c in cols]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 400), min_size=1, max_size=12),  # steps between two snapshots
    st.lists(VALUES, min_size=1, max_size=64),
)
def test_percentiles_of_the_kept_sorted_columns_are_those_sorted_afresh(gaps, values):
    s = StepSeries(1)
    pool = values
    n, t = 0, 0.0
    for k, gap in enumerate([LIVE_WINDOW + 3, *gaps]):
        for _ in range(gap):
            d = abs(pool[n % len(pool)]) + 1e-3
            data = pool[(n * 7 + k) % len(pool)]
            s.add_record(n, t, t + d, data, d * 0.25, d * 0.125)
            n, t = n + 1, t + d
        got, want = _cached(s), _fresh(s)
        assert all(_same(a, b) for a, b in zip(got, want)), (n, got, want)


def test_a_snapshot_after_a_few_steps_updates_in_place_and_after_many_sorts_whole():
    """Ten new steps: the copies are updated (the same lists); more than a twentieth of
    the ring new: sorted whole (new lists). Each time the figures of a fresh sort."""
    s = StepSeries(1)
    for i in range(LIVE_WINDOW + 50):
        s.add_record(i, float(i), i + 0.01 + (i % 17) * 1e-3, 0.001 * (i % 5), 0.002, 0.001)
    first = s.sorted_ring.sorted(s.columns(), s.count)
    ids = [id(c) for c in first]
    for i in range(s.count, s.count + 10):
        s.add_record(i, float(i), i + 0.05, 0.004, 0.002, 0.001)
    again = s.sorted_ring.sorted(s.columns(), s.count)
    assert [id(c) for c in again] == ids
    assert _cached(s) == _fresh(s)
    for i in range(s.count, s.count + LIVE_WINDOW // 4):
        s.add_record(i, float(i), i + 0.002, 0.0, 0.001, 0.0005)
    whole = s.sorted_ring.sorted(s.columns(), s.count)
    assert [id(c) for c in whole] != ids
    assert _cached(s) == _fresh(s)


def test_the_stats_of_a_full_ring_and_of_a_replay_checkpoint_agree():
    """stats() reads the kept copies; a series pickled (a replay checkpoint) and restored
    has none and reads the same figures."""
    s = StepSeries(1)
    for i in range(LIVE_WINDOW * 2 + 7):
        s.add_record(i, float(i), i + 0.01 + (i % 13) * 1e-3, 0.001 * (i % 3), 0.002, 0.001)
        if i % 97 == 0:
            step_stats(s, 0)
    back = pickle.loads(pickle.dumps(s))
    assert step_stats(back, 0) == step_stats(s, 0)
    ring = SortedRing(LIVE_WINDOW)
    assert ring.sorted(s.columns(), s.count) == [sorted(c) for c in s.columns()]


def test_a_nan_in_the_ring_sorts_it_whole():
    """A NaN overwritten is not found by a binary search: the columns are sorted whole, not
    left holding it."""
    ring = SortedRing(8)
    col = array("d", [0.5, math.nan, 0.1, 0.3, 0.2, 0.9, 0.4, 0.7])
    ring.sorted([col], 8)
    col[0], col[1] = 0.8, 0.6  # steps 8 and 9 overwrite the first two, the NaN's the second
    got = ring.sorted([col], 10)
    assert got == [sorted(col)] and not any(math.isnan(v) for v in got[0])
