"""The hint that links a slow phase to its top ops once a capture exists
(``phase-top-ops``), through the live engine's persistence; its firing and near-miss bars
are in tests/test_hints_near_miss.py."""

from __future__ import annotations

from perftop.events import MonitorStats
from perftop.hints import hinted_session
from tests.tui.fakes import T0, capture_events


def _hints_after(events, seconds: float = 6.0):
    s = hinted_session()
    s.apply_all(events)
    t = events[-1].t
    for i in range(int(seconds * 2)):  # the engine runs on event time: let some pass
        s.apply(MonitorStats(t + 0.5 * (i + 1), 1.0, 1))
    return {h.id: h for h in s.snapshot().hints}


def test_a_capture_links_the_slow_phase_to_its_top_ops() -> None:
    hints = _hints_after(capture_events("done"))
    h = hints["phase-top-ops"]
    assert h.title == "backward takes 49% of the step, aten::mm most of it"
    assert h.evidence[0] == "backward 30.1ms of a 61.3ms step (steps 1352–1354, pid 4242)"
    assert h.evidence[1] == (
        "top backward ops in the capture at step 1352: "
        "aten::mm 65%, aten::gelu_backward 11%, aten::native_layer_norm_backward 7%"
    )
    assert h.panel == "ops" and "train.py:71" in h.advice[0]
    assert h.since_t is not None and h.since_t >= T0 + 80.3 + 3.0  # held 3 s before shown


def test_no_capture_done_no_link() -> None:
    assert "phase-top-ops" not in _hints_after(capture_events("started"))
    assert "phase-top-ops" not in _hints_after(capture_events("refused"))
