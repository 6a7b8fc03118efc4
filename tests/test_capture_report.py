"""`perftop report` of a recording with op captures: the JSON key ``captures`` (stable
names) and the text section, from a real torch.profiler capture (tests/capture_run.py)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from perftop.events import CaptureAsk, CaptureState, SessionStart
from perftop.recording import RecordingWriter

OP_KEYS = {"name", "phase", "calls_per_step", "self_s", "device_s", "share", "shapes", "file",
           "line", "function"}  # fmt: skip


@pytest.fixture(scope="module")
def recording(real_capture, tmp_path_factory) -> Path:
    rc = real_capture
    rec = tmp_path_factory.mktemp("report") / "run.perftop"
    w = RecordingWriter(rec)
    w.write_events([SessionStart(rc.before[0].t0 - 1, ("python", "train.py"), "/", "h", 1, "t")])
    asked, started, done = rc.states
    w.write_events([*rc.before, CaptureAsk(asked.t, "c1", 3, "", "tui"), asked, started])
    w.write_events([*rc.steps, done, rc.ops])
    t = rc.ops.t + 1
    w.write_events([CaptureState(t, 0, "c2", "asked", steps=3)])
    w.write_events(
        [CaptureState(t + 0.1, rc.ops.pid, "c2", "refused", "torch.compile is compiling")]
    )
    w.close()
    return rec


def test_replay_shows_each_capture_from_its_step_on(recording: Path) -> None:
    """The player (what `perftop replay` shows) at a step: the capture in effect there."""
    from perftop.model.capture_words import status_line
    from perftop.replay.index import ReplayIndex
    from perftop.replay.player import Player

    ix = ReplayIndex(recording)
    ix.build()
    p = Player(ix)
    p.seek_step(3)  # the 3 steps before the capture
    assert p.snapshot().latest_capture is None
    p.seek_step(4)  # the capture's first step
    assert status_line(p.snapshot().latest_capture) == "capturing steps 42–44…"
    p.seek_event(ix.events)
    snap = p.snapshot()
    assert [c.state for c in snap.captures] == ["done", "refused"]
    p.seek_step(4)  # back again: as a straight replay to there
    assert status_line(p.snapshot().latest_capture) == "capturing steps 42–44…"


def _report(*args: str) -> str:
    cmd = [sys.executable, "-m", "perftop", "report", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120).stdout


def test_report_json_captures(recording: Path, real_capture) -> None:
    rc = real_capture
    caps = json.loads(_report(str(recording), "--json"))["captures"]
    assert [(c["id"], c["state"]) for c in caps] == [("c1", "done"), ("c2", "refused")]
    done, refused = caps
    assert done["by"] == "tui" and done["pid"] == rc.ops.pid
    assert (done["first_step"], done["steps"]) == (41, 3)
    assert done["step_s"] == pytest.approx(rc.ops.step_s) and done["before_s"] > 0
    before = statistics.median(b.duration for b in rc.before)  # the session's 3 steps before
    assert done["before_steps"] == 3 and done["before_s"] == pytest.approx(before, abs=1e-8)
    assert done["cost"] == pytest.approx(rc.ops.step_s - before, abs=1e-8)
    assert set(done["phase_s"]) == {"data", "forward", "backward", "optimizer", "between"}
    assert done["trace"] == str(rc.trace) and done["device"] == {}
    assert all(set(op) == OP_KEYS for op in done["ops"]) and len(done["ops"]) == 20
    # the capture's ops, heaviest first as recorded (a tiny step's top op may be aten::t)
    assert [(op["name"], op["phase"]) for op in done["ops"]] == [r[:2] for r in rc.ops.ops]
    fwd = [op for op in done["ops"] if op["phase"] == "forward"]
    assert {"aten::addmm", "aten::mm"} & {op["name"] for op in fwd}
    assert all(op["line"] > 0 for op in fwd)
    assert refused["reason"] == "torch.compile is compiling" and refused["first_step"] is None
    assert refused["status"] == "capture refused: torch.compile is compiling"


def test_report_text_captures(recording: Path, real_capture) -> None:
    text = _report(str(recording))
    section = text[text.index("Op captures") :]
    assert f"c1 (tui) pid {real_capture.ops.pid}: steps 42–44 captured, cost " in section
    fwd = next(line for line in section.splitlines() if line.strip().startswith("forward"))
    top = next(r[0] for r in real_capture.ops.ops if r[1] == "forward")  # heaviest recorded
    assert top in fwd
    assert f"trace: {real_capture.trace}" in section
    assert "c2" in section and "capture refused: torch.compile is compiling" in section
