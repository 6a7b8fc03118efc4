"""The model of on-demand op captures: a real torch.profiler capture's summary (see
tests/capture_run.py) folded into the snapshot, with its states, refusals and cost."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from perftop.events import CaptureAsk, CaptureState
from perftop.fmt import seconds
from perftop.hook.batch import RECENT_STEPS
from perftop.hook.capture_cost import baseline
from perftop.model import Session
from perftop.model.capture import HOOK_BEFORE_STEPS, cost_error
from perftop.model.capture_words import cost_text
from perftop.model.stats import median


def _session(*events) -> Session:
    s = Session()
    s.apply_all(events)
    return s


def test_a_done_capture_is_the_latest_with_its_ops_shares_and_cost(real_capture) -> None:
    rc = real_capture
    ask = CaptureAsk(rc.states[0].t, "c1", 3, "/tmp/x.", "tui")
    snap = _session(*rc.before, ask, *rc.states, *rc.steps, rc.ops).snapshot()
    cap = snap.latest_capture
    assert cap is not None and cap.capture_id == "c1" and cap.by == "tui" and cap.steps == 3
    assert cap.state == "done"
    # the monitor's own "asked" gives way to the process's answer
    assert [p.pid for p in cap.shown_parts()] == [rc.ops.pid]
    part = cap.done()
    assert part is not None and part.first_step == 41 and part.last_step == 43
    assert part.trace == str(rc.trace) and part.clock_offset_us == rc.clock_offset_us
    # the hook's figure: the median of the steps sent before it (3 here)
    assert part.before_n == rc.ops.before_n == 3
    assert part.before_s == pytest.approx(median([b.duration for b in rc.before]))
    assert part.cost_s == pytest.approx(rc.ops.step_s - part.before_s)
    forward = [op for op in part.ops if op.phase == "forward"]
    # heaviest first; the matmul near the top (a preemption inside aten::linear's own
    # dispatch on a loaded host may put linear's self time above it: torch's timing)
    assert [op.self_s for op in forward] == sorted((op.self_s for op in forward), reverse=True)
    op = next(op for op in forward[:3] if op.name in ("aten::addmm", "aten::mm"))
    assert op.where == f"capture_run.py:{op.line} {op.function}()" and op.line > 0
    for op in part.ops:
        assert op.share == pytest.approx(op.self_s / part.phase_s[op.phase])
    for phase, secs in part.phase_s.items():  # a real profile: self times fit in the phase
        assert sum(op.self_s for op in part.ops if op.phase == phase) <= secs + 1e-9


def test_asked_started_refused_and_a_late_state_after_done(real_capture) -> None:
    pid = real_capture.ops.pid
    s = _session(CaptureState(10.0, 0, "c1", "asked", steps=3))
    cap = s.snapshot().latest_capture
    assert cap is not None and cap.state == "asked" and cap.steps == 3
    s.apply(CaptureState(10.5, pid, "c1", "started", first_step=41, steps=3))
    part = s.snapshot().latest_capture.shown_parts()[0]
    assert (part.state, part.first_step, part.last_step) == ("started", 41, 43)
    s.apply(CaptureState(11.0, pid, "c2", "refused", "torch.compile is compiling"))
    cap = s.snapshot().latest_capture
    assert cap.capture_id == "c2" and cap.state == "refused"
    assert cap.shown_parts()[0].reason == "torch.compile is compiling"
    # a summary, then a stray state: the summary stays
    s.apply(real_capture.ops)
    s.apply(CaptureState(12.0, pid, "c1", "failed", "late"))
    c1 = s.snapshot().captures[0]
    assert c1.state == "done" and c1.done() is not None and c1.done().ops


def test_the_monitor_refusing_before_any_hook_is_shown() -> None:
    s = _session(
        CaptureState(1.0, 0, "c1", "asked", steps=3),
        CaptureState(1.1, 0, "c1", "refused", "the session's socket belongs to another user"),
    )
    cap = s.snapshot().latest_capture
    assert cap.state == "refused"
    assert cap.shown_parts()[0].reason == "the session's socket belongs to another user"


def test_the_capture_in_effect_follows_the_stream(real_capture) -> None:
    """Folded up to a point of the stream (as a replay does), the latest capture is the one
    asked by then: before the second capture, the first one's summary."""
    rc = real_capture
    s = _session(*rc.states, rc.ops)
    assert s.snapshot().latest_capture.capture_id == "c1"
    s.apply(CaptureState(rc.ops.t + 5, 0, "c2", "asked", steps=2))
    assert s.snapshot().latest_capture.capture_id == "c2"
    assert [c.capture_id for c in s.snapshot().captures] == ["c1", "c2"]


def test_a_collector_shows_its_nodes_captures(real_capture) -> None:
    from perftop.events import NodeScope
    from perftop.model.fleet import FleetSession

    rc = real_capture
    s = FleetSession(Session)
    s.apply_all([NodeScope("n1"), *rc.states, rc.ops, NodeScope("")])
    s.apply_all([NodeScope("n2"), CaptureState(rc.ops.t + 1, 7, "c9", "refused", "why")])
    caps = s.snapshot().captures
    assert [(c.capture_id, c.state) for c in caps] == [("c1", "done"), ("c9", "refused")]


def test_the_cost_is_measured_against_the_median_of_the_steps_before(real_capture) -> None:
    """Two slow steps just before the capture (a save, a busy machine): the mean of the 2
    steps before made the capture look free (-71% in a demo); the hook's median of the 20
    steps before does not, and the model shows that one figure. An older hook's event
    (``before_n`` 0) is the mean of the 2 steps before, shown as such."""
    pid = 7
    durations = [(i, 0.05 if i >= 28 else 0.01) for i in range(30)]
    before_s, before_n, sd = baseline(durations[-RECENT_STEPS:], 30, 0.05)
    assert before_n == RECENT_STEPS and before_s == pytest.approx(0.01) and sd == 0.0
    assert baseline(durations[:2], 30, 0.05) == (0.05, HOOK_BEFORE_STEPS, 0.0)  # the mean
    assert baseline([], 30, 0.0) == (0.0, 0, 0.0)
    ops = replace(real_capture.ops, pid=pid, capture_id="c9", first_step=30, step_s=0.012,
                  before_s=before_s, before_n=before_n, before_sd_s=sd)  # fmt: skip
    started = CaptureState(100.0, pid, "c9", "started", first_step=30, steps=3)
    part = _session(started, ops).snapshot().captures[0].done()
    assert part is not None and part.before_n == RECENT_STEPS
    assert part.before_s == pytest.approx(0.01) and part.cost_s == pytest.approx(0.002)
    assert cost_text(part) == "cost +2.0ms/step (+20% on 20 steps before)"
    # The steps just after it, while its summary and trace were made, are its cost too.
    after = replace(ops, after_s=0.03, after_n=4)
    part = _session(started, after).snapshot().captures[0].done()
    assert part is not None and part.cost_s == pytest.approx(0.002 + 0.03 / 3)
    assert cost_text(part) == (
        "cost +12.0ms/step (+120% on 20 steps before; +30.0ms in the 4 steps after it)"
    )
    old = replace(ops, before_s=0.05, before_n=0)  # an older hook's event
    alone = _session(started, old).snapshot().captures[0].done()
    assert alone is not None and alone.before_n == HOOK_BEFORE_STEPS
    assert alone.before_s == pytest.approx(0.05) and alone.cost_s == pytest.approx(-0.038)


def test_a_cost_inside_the_steps_own_spread_says_its_error(real_capture) -> None:
    """A demo's steps moved by milliseconds from one to the next (data waits): three
    captured steps 0.2 ms faster than the median before read "cost -200µs/step (-2% ...)",
    a capture that sped training up. With the spread of the steps before (the hook's
    robust standard deviation), the cost says its standard error, which holds it."""
    pid = 7
    durations = [(i, 0.010 if i % 2 else 0.014) for i in range(20)]
    before_s, before_n, sd = baseline(durations, 20, 0.012)
    assert before_s == pytest.approx(0.012) and sd == pytest.approx(1.4826 * 0.002)
    ops = replace(real_capture.ops, pid=pid, capture_id="c9", first_step=20, steps=3,
                  step_s=0.0118, before_s=before_s, before_n=before_n, before_sd_s=sd,
                  after_s=0.0, after_n=0)  # fmt: skip
    started = CaptureState(100.0, pid, "c9", "started", first_step=20, steps=3)
    part = _session(started, ops).snapshot().captures[0].done()
    assert part is not None
    err = sd * math.sqrt(1 / 3 + math.pi / (2 * 20))
    assert part.cost_err_s == pytest.approx(err) and abs(part.cost_s) < err
    assert cost_text(part) == f"cost -200µs/step ±{seconds(err)} (-2% on 20 steps before)"
    # any writer's event: absurd figures give no error, never an exception (the hostile
    # events test drew after_n -2**63)
    assert cost_error(1.0, 1, -(2**63), 3) == pytest.approx(math.sqrt(1 + math.pi / 6))
    assert cost_error(math.nan, 3, 0, 20) is None and cost_error(math.inf, 3, 0, 20) is None
    # the real capture's hook figure: its steps' own spread, and the error made of it
    real = _session(started, replace(real_capture.ops, pid=pid, capture_id="c9"))
    done = real.snapshot().captures[0].done()
    assert done is not None
    if real_capture.ops.before_sd_s > 0:
        assert done.cost_err_s is not None and f"±{seconds(done.cost_err_s)} (" in cost_text(done)
    else:  # two of its 3 steps before as long, to the 0.24 us of a difference of Unix times
        # (once on CI): no spread is known, and the cost is said without an error
        durations = [b.duration for b in real_capture.before]
        assert len(set(durations)) < len(durations), durations
        assert done.cost_err_s is None and "±" not in cost_text(done)
