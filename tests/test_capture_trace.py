"""A capture's full trace with perftop's step track on its clock: rewritten live by the
run flow's subscriber, and included in ``perftop export --chrome-trace`` on the export's
clock. The trace is a real torch.profiler trace of a small MLP (tests/capture_run.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from perftop.events import SessionStart
from perftop.export.capture_trace import STEP_TID, annotate
from perftop.flows.captures import CaptureTraces, follow_captures
from perftop.monitor.hub import Hub
from perftop.monitor.sinks import BufferedSink
from perftop.recording import RecordingWriter
from perftop.wire import KIND_JSON, Frame, encode_frame


def _ops(events: list[dict], pid: int) -> list[dict]:
    return [e for e in events if e.get("cat") == "cpu_op" and e.get("pid") == pid]


def _inside(op: dict, steps: list[dict]) -> bool:
    return any(s["ts"] <= op["ts"] and op["ts"] + op["dur"] <= s["ts"] + s["dur"] for s in steps)


def _a_trace_a_reader_loads(events: list[dict]) -> None:
    """What a Chrome/Perfetto JSON reader needs of each event: a phase, a pid and tid (an
    integer, or a name as Kineto's own "Spans" track has), numeric timestamps (metadata
    aside), a duration >= 0 for complete events."""
    for e in events:
        assert isinstance(e.get("ph"), str) and isinstance(e.get("name"), str), e
        assert isinstance(e.get("pid"), (int, str)) and isinstance(e.get("tid", 0), (int, str)), e
        if e["ph"] != "M":
            assert isinstance(e.get("ts"), (int, float)), e
        if e["ph"] == "X":
            assert isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, e


def _check_ops_in_steps(events: list[dict], pid: int, want_steps: int) -> None:
    _a_trace_a_reader_loads(events)
    steps = [e for e in events if e.get("cat") == "step" and e.get("pid") == pid]
    assert len(steps) == want_steps
    addmm = [e for e in _ops(events, pid) if e["name"] == "aten::addmm"]
    assert len(addmm) >= 2 * want_steps  # two Linear layers a step
    assert all(_inside(op, steps) for op in addmm), "ops outside their step: not one clock"
    phases = {e["name"] for e in events if e.get("cat") == "phase" and e.get("pid") == pid}
    assert {"forward/other", "backward", "optimizer"} <= phases


@pytest.fixture
def trace(real_capture, tmp_path: Path) -> Path:
    return Path(shutil.copy(real_capture.trace, tmp_path / real_capture.trace.name))


def test_annotate_puts_the_steps_on_the_traces_clock_once(real_capture, trace: Path) -> None:
    rc = real_capture
    n = annotate(trace, rc.steps, rc.clock_offset_us)
    annotate(trace, rc.steps, rc.clock_offset_us)  # again: replaced, not doubled
    doc = json.loads(trace.read_text())
    ours = [e for e in doc["traceEvents"] if e.get("tid") == STEP_TID]
    assert len(ours) == n
    _check_ops_in_steps(doc["traceEvents"], rc.ops.pid, len(rc.steps))
    assert doc["otherData"]["perftop_steps"] == [41, 42, 43]
    assert doc["baseTimeNanoseconds"]  # the profiler's own keys are kept
    assert [p.name for p in trace.parent.iterdir()] == [trace.name]  # no temporary left


def _frame(*events) -> Frame:
    return Frame(KIND_JSON, encode_frame(list(events))[12:])


def test_the_subscriber_waits_for_the_captures_steps_then_rewrites(real_capture, trace) -> None:
    rc = real_capture
    pid = rc.ops.pid
    steps = rc.steps
    ops = replace(rc.ops, trace=str(trace))
    said: list[str] = []
    sink = CaptureTraces(said.append)
    sink.write_frame(_frame(*steps[:2], ops))  # the summary before its last step
    assert sink.annotated == []
    sink.write_frame(_frame(steps[2]))
    assert sink.annotated == [str(trace)]
    _check_ops_in_steps(json.loads(trace.read_text())["traceEvents"], pid, 3)
    # a trace that is gone: one line, and the sink goes on
    sink.write_frame(_frame(replace(ops, capture_id="c9", trace=str(trace) + ".gone")))
    assert len(said) == 1 and "c9" in said[0] and "cannot read" in said[0]
    assert not (trace.parent / (trace.name + ".gone")).exists()


def test_the_subscriber_decodes_steps_only_while_a_capture_may_need_them(
    real_capture, trace
) -> None:
    """Steps before any capture are not decoded nor kept (a run without captures costs the
    subscriber a byte search a frame); from a capture's first state event on, they are,
    and its trace gets its steps as before."""
    rc = real_capture
    sink = CaptureTraces(lambda text: None)
    for s in rc.before:
        sink.write_frame(_frame(s))
    assert sink.steps == {} and not sink.watching()
    sink.write_frame(_frame(*rc.states))
    assert sink.watching()
    for s in rc.steps:
        sink.write_frame(_frame(s))
    sink.write_frame(_frame(replace(rc.ops, trace=str(trace))))
    assert sink.annotated == [str(trace)]
    _check_ops_in_steps(json.loads(trace.read_text())["traceEvents"], rc.ops.pid, 3)


def test_export_chrome_trace_includes_the_capture_on_its_clock(real_capture, tmp_path) -> None:
    rc = real_capture
    trace = Path(shutil.copy(rc.trace, tmp_path / "c.trace.json"))
    pid = rc.ops.pid
    start = rc.before[0].t0 - 1.0
    rec = tmp_path / "run.perftop"
    w = RecordingWriter(rec)
    w.write_events([SessionStart(start, ("python", "train.py"), "/", "h", 1, "test")])
    w.write_events([*rc.before, *rc.steps])
    w.write_events([*rc.states, replace(rc.ops, trace=str(trace))])
    w.close()
    out = tmp_path / "out.json"
    cmd = [sys.executable, "-m", "perftop", "export", str(rec), "--chrome-trace", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    events = json.loads(out.read_text())["traceEvents"]
    # 6 steps in the export; the capture's ops lie inside the captured ones (µs since start)
    steps = [e for e in events if e.get("cat") == "step" and e.get("pid") == pid]
    assert len(steps) == 6 and min(e["ts"] for e in steps) == pytest.approx(1e6, abs=1.0)
    captured = [s for s in steps if s["args"]["index"] >= 41]
    addmm = [e for e in _ops(events, pid) if e["name"] == "aten::addmm"]
    assert len(addmm) >= 6 and all(_inside(op, captured) for op in addmm)
    # the export names the process itself; the trace's own naming of it is left out
    names = [e for e in events if e.get("name") == "process_name" and e.get("pid") == pid]
    assert len(names) == 1 and names[0]["args"]["name"].startswith("trainer")


def _until(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_run_flows_subscriber_on_a_real_hub(real_capture, trace) -> None:
    """As `perftop run` wires it: a capture's summary through the hub rewrites its trace on
    the subscriber's own thread; a trace it cannot rewrite is one note in the session."""
    rc = real_capture
    hub = Hub(refresh_s=0.05).start()
    try:
        sink = follow_captures(hub)
        hub.submit(*rc.before, *rc.states, *rc.steps, replace(rc.ops, trace=str(trace)))
        _until(lambda: sink.annotated == [str(trace)])
        _check_ops_in_steps(json.loads(trace.read_text())["traceEvents"], rc.ops.pid, 3)
        hub.submit(replace(rc.ops, capture_id="c2", trace=str(trace.parent / "gone.json")))
        _until(lambda: any(n.source == "capture" for n in hub.session.snapshot().notes))
        note = next(n for n in hub.session.snapshot().notes if n.source == "capture")
        assert note.text.startswith("capture c2: steps not added to its trace: cannot read")
    finally:
        hub.stop()


def test_frames_no_capture_needs_are_not_queued_for_the_subscriber(real_capture, trace) -> None:
    """Through its buffer, as the hub feeds it: frames before any capture are never queued
    (its thread is not woken for them), and from a capture's first state event on every
    frame is, in order, so its trace gets its steps."""
    rc = real_capture

    class Counting(CaptureTraces):
        given = 0

        def write_frame(self, frame: Frame) -> None:
            self.given += 1
            super().write_frame(frame)

    sink = Counting(lambda text: None)
    buf = BufferedSink(sink)
    try:
        assert sink.idle_s() is None  # nothing pending: its thread sleeps until a frame
        for s in rc.before:
            assert buf.put(_frame(s))
        buf.kick()
        assert not buf._q and sink.given == 0
        after = [_frame(*rc.states), *(_frame(s) for s in rc.steps)]
        after.append(_frame(replace(rc.ops, trace=str(trace))))
        for f in after:
            buf.put(f)
        buf.kick()
        _until(lambda: sink.annotated == [str(trace)])
        assert sink.given == len(after)
    finally:
        buf.close()
    _check_ops_in_steps(json.loads(trace.read_text())["traceEvents"], rc.ops.pid, 3)
