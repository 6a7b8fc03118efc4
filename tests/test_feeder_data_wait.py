"""Data wait behind a feeder (issue 30 item 3): loops fed by a queue thread, a generator
and a prefetcher class, each timing its own fetch (tests/workloads/feeders.py); perftop's
data wait is the training thread's wait before each step's first forward. A compiled
model's loop computes and compiles the same with and without perftop."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from perftop.events import Hello, Note, Step
from perftop.hints.inputs import INPUT_ENTER
from perftop.model import Session
from perftop.recording import read_events
from perftop.wire import DATA_WAIT_NOTE, DATA_WAIT_NOTE_V1
from tests.helpers import WORKLOADS, run_and_report

FEEDERS = str(WORKLOADS / "feeders.py")


def _own(stdout: str) -> dict[str, Any]:
    return json.loads(next(ln for ln in stdout.splitlines() if ln.startswith('{"shape"')))


@pytest.fixture(scope="module", params=["queue", "generator", "prefetcher"])
def feeder(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    proc, r = run_and_report(d, sys.executable, FEEDERS, request.param)
    assert proc.returncode == 0, proc.stderr
    steps = [e for e in read_events(str(d / "r.perftop")) if isinstance(e, Step)]
    return _own(proc.stdout), r["steps"], steps, {h["id"]: h for h in r["hints"]}


def test_feeder_data_wait_matches_the_loops_own_timer(feeder):
    own, s, steps, _ = feeder
    assert s["count"] == own["steps"] == 40
    assert s["data_wait_source"] == "before_forward"
    assert s["data_wait_fraction"] is not None and "data" in s["phases_s"]
    # the first step began at its first backward: its wait is not seen
    ours, theirs = sum(st.data for st in steps), own["wait_s"] - own["first_wait_s"]
    assert abs(ours - theirs) <= max(0.1 * theirs, 0.002), (ours, theirs)


def test_a_slow_feeder_shows_its_wait_but_no_input_bound(feeder):
    """A batch every 20 ms for a step of a few ms: the figure says the loop waits most of
    each step, but behind a feeder it may hold the loop's own blocking work (a sleep), so
    ``input-bound`` stays out (the Steps panel shows the figure)."""
    _own_count, s, _steps, hints = feeder
    assert s["data_wait_fraction"] > 0.5
    assert "input-bound" not in hints


def test_a_feeder_that_keeps_up_is_not_input_bound(tmp_path):
    """Near miss: a queue kept full. The loop's own work before its forward
    (``zero_grad()`` and the loop's lines, on the CPU) is no data wait."""
    proc, r = run_and_report(tmp_path, sys.executable, FEEDERS, "fast_queue")
    assert proc.returncode == 0, proc.stderr
    own, s = _own(proc.stdout), r["steps"]
    assert s["data_wait_source"] == "before_forward"
    assert s["data_wait_fraction"] < INPUT_ENTER, (s, own)  # near 0 on an idle host
    assert "input-bound" not in {h["id"] for h in r["hints"]}


@pytest.mark.parametrize("shape", ["compiled", "inplace"])
def test_compiled_feeder_loop_computes_and_compiles_the_same(tmp_path, shape):
    plain = subprocess.run(
        [sys.executable, FEEDERS, shape], capture_output=True, text=True, timeout=300
    )
    assert plain.returncode == 0, plain.stderr
    proc, r = run_and_report(tmp_path, sys.executable, FEEDERS, shape)
    assert proc.returncode == 0, proc.stderr
    a, b = _own(plain.stdout), _own(proc.stdout)
    assert (a["losses"], a["graphs"], a["frames"]) == (b["losses"], b["graphs"], b["frames"])
    assert "global hooks" not in proc.stderr and "perf_counter" not in proc.stderr
    if shape == "compiled":  # the wrapper's call is the step's first forward, outside dynamo
        assert r["steps"]["data_wait_source"] == "before_forward"


@pytest.mark.parametrize("text", [DATA_WAIT_NOTE, DATA_WAIT_NOTE_V1])
def test_the_hooks_note_says_how_data_wait_was_measured(text):
    """The hook's note marks its process's data wait as a feeder's; a recording of 0.1
    said it in other words, read the same (and another process's note is not this one's)."""
    s = Session()
    s.apply(Hello(100.0, 7, 1, "h", ("train.py",)))
    for i in range(4):
        s.apply(Step(7, i, 100.0 + i, 101.0 + i, 0.2, 0.3, 0.1, None, "optimizer"))
    assert s.snapshot(window=None).steps.data_wait_source is None  # no DataLoader seen
    s.apply(Note(101.0, "info", "hook:8", text))
    assert s.snapshot(window=None).steps.data_wait_source is None
    s.apply(Note(101.0, "info", "hook:7", text))
    assert s.snapshot(window=None).steps.data_wait_source == "before_forward"
