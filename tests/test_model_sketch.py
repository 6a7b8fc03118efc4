"""Whole-run step figures from a bounded sketch: within its stated relative error of the
exact figures, exact while the run fits in the live window, and memory that stays bounded."""

from __future__ import annotations

import importlib.util
import random
from bisect import bisect_left
from pathlib import Path

from perftop.model import Session
from perftop.model.sketch import RELATIVE_ERROR, Sketch
from perftop.model.stats import percentile
from perftop.model.steps import LIVE_WINDOW, STEP_BUCKETS
from perftop.recording import read_events
from perftop.report.build import build_report

ROOT = Path(__file__).resolve().parent.parent


def close(a: float | None, b: float | None, rel: float = RELATIVE_ERROR) -> bool:
    assert a is not None and b is not None
    return abs(a - b) <= rel * abs(b) + 1e-12


def test_sketch_percentiles_within_the_stated_error() -> None:
    rnd = random.Random(5)
    xs = [rnd.lognormvariate(-3, 1.5) for _ in range(20000)] + [0.0] * 300
    xs += [-rnd.uniform(1e-6, 1e-3) for _ in range(200)]  # e.g. a clock step backwards
    sk = Sketch()
    sk.add_all(xs)
    exact = sorted(xs)
    for q in (0, 1, 5, 25, 50, 75, 95, 99, 99.9, 100):
        assert close(sk.percentile(q), percentile(exact, q)), q
    assert sk.count == len(xs) and sk.buckets() < 2000
    assert Sketch().percentile(50) is None


def _steps(n: int, seed: int = 1) -> list:
    from perftop.events import Step

    rnd, t, out = random.Random(seed), 1000.0, []
    for i in range(n):
        d = rnd.lognormvariate(-3, 0.4) * (8 if rnd.random() < 0.01 else 1)
        a, b, c = d * rnd.uniform(0, 0.3), d * rnd.uniform(0.2, 0.4), d * rnd.uniform(0.1, 0.2)
        out.append(Step(7, i, t, t + d, a, b, c))
        t += d + rnd.uniform(0, 0.002)
    return out


def test_whole_run_figures_against_exact_ones() -> None:
    steps = _steps(12000)
    s = Session()
    s.apply_all(steps)
    whole, live = s.snapshot(window=None).steps, s.snapshot().steps
    durs = [e.t1 - e.t0 for e in steps]
    data = [e.data for e in steps]
    bwd = [e.backward for e in steps]
    opt = [e.optimizer for e in steps]
    other = [max(0.0, d - a - b - c) for d, a, b, c in zip(durs, data, bwd, opt)]
    assert whole.count == live.count == 12000
    assert close(whole.p50, percentile(sorted(durs), 50))
    assert close(whole.p95, percentile(sorted(durs), 95))
    assert whole.max == max(durs)
    assert close(whole.steps_per_s, len(durs) / sum(durs), 1e-9)
    assert close(whole.data_wait_fraction, sum(data) / sum(durs), 1e-9)
    for name, xs in (
        ("data", data),
        ("backward", bwd),
        ("optimizer", opt),
        ("forward/other", other),
    ):
        assert close(whole.phase_p50[name], percentile(sorted(xs), 50)), name
    assert close(whole.own_p50, percentile(sorted(d - b for d, b in zip(durs, bwd)), 50))
    hist = [0] * (len(STEP_BUCKETS) + 1)
    for d in durs:
        hist[bisect_left(STEP_BUCKETS, d)] += 1
    assert list(whole.step_hist) == hist
    assert close(whole.step_sum_s, sum(durs), 1e-9)
    tail = sorted(durs[-LIVE_WINDOW:])  # the live figures stay exact over their window
    assert (live.p50, live.p95, live.max) == (
        percentile(tail, 50), percentile(tail, 95), tail[-1]
    )  # fmt: skip
    series = s.reducers[1].series[7]  # bounded: the ring, and sketches of few buckets
    assert len(series.durations) == LIVE_WINDOW and len(series.recent) < LIVE_WINDOW
    assert sum(sk.buckets() for sk in series.sketches) < 3000


def test_a_short_run_is_exact() -> None:
    steps = _steps(LIVE_WINDOW)
    s = Session()
    s.apply_all(steps)
    durs = sorted(e.t1 - e.t0 for e in steps)
    w = s.snapshot(window=None).steps
    assert (w.p50, w.p95) == (percentile(durs, 50), percentile(durs, 95))


def test_report_of_a_recording_against_exact_figures(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_replay", ROOT / "benchmarks/replay.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path = tmp_path / "r.perftop"
    bench.generate(path, 5000, 2, 0.05, eval_every=2000)
    events = list(read_events(path))
    s = Session()
    s.apply_all(events)
    rep = build_report(s.snapshot(window=None))["steps"]
    durs = sorted(e.t1 - e.t0 for e in events if type(e).__name__ == "Step")
    assert rep["count"] == len(durs) == 5000
    assert close(rep["step_time_s"]["p50"], percentile(durs, 50), RELATIVE_ERROR + 1e-5)
    assert close(rep["step_time_s"]["p95"], percentile(durs, 95), RELATIVE_ERROR + 1e-5)
    assert rep["step_time_s"]["max"] == round(durs[-1], 6)


def test_the_rate_over_wall_time_holds_the_time_between_steps_of_its_window() -> None:
    """``wall_steps_per_s``: the window's steps over the wall time from its first step's
    start to its last one's end (an evaluation between steps in it counts), beside
    ``steps_per_s`` over the steps' own time; the whole run's from the first step on."""
    from perftop.events import Step

    s, t = Session(), 1000.0
    for i in range(2 * LIVE_WINDOW):
        if i in (LIVE_WINDOW // 2, 3 * LIVE_WINDOW // 2):
            t += 5.0  # an evaluation between steps: 5 s
        s.apply(Step(7, i, t, t + 0.01, 0.0, 0.004, 0.001))
        t += 0.01
    live = s.snapshot(now=t).steps
    assert close(live.steps_per_s, 100.0, 1e-9)
    assert close(live.wall_steps_per_s, LIVE_WINDOW / (LIVE_WINDOW * 0.01 + 5.0), 1e-9)
    whole = s.snapshot(window=None).steps
    assert close(whole.wall_steps_per_s, 2 * LIVE_WINDOW / (2 * LIVE_WINDOW * 0.01 + 10.0), 1e-9)
    last = s.snapshot(now=t, window=100).steps  # no evaluation among the last 100
    assert close(last.wall_steps_per_s, 100.0, 1e-9)
    rep = build_report(s.snapshot(window=None))["steps"]
    assert rep["wall_steps_per_s"] == round(whole.wall_steps_per_s, 3)
