"""Code shapes of well-known training scripts under ``perftop run``, each compared with what
the job measured about itself (tests/workloads/loop_shapes.py prints its own figures): its
step count, its own timers, dynamo's counters, its exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from perftop.events import Between, Step
from perftop.recording import read_events
from tests.helpers import WORKLOADS, run_and_report
from tests.plainrun import run_plain

SHAPES = str(WORKLOADS / "loop_shapes.py")


def _own(stdout: str) -> dict[str, Any]:
    return json.loads(next(ln for ln in stdout.splitlines() if ln.startswith('{"shape"')))


def _run(tmp_path: Path, shape: str) -> tuple[dict[str, Any], dict[str, Any], list[Step]]:
    d = tmp_path / shape
    d.mkdir()
    proc, r = run_and_report(d, sys.executable, SHAPES, shape)
    assert proc.returncode == 0, proc.stderr
    steps = [e for e in read_events(str(d / "r.perftop")) if isinstance(e, Step)]
    return _own(proc.stdout), r["steps"], steps


def test_reentrant_checkpointing_counts_backward_once(tmp_path):
    """Six blocks under use_reentrant=True: every step has a forward, no phase sum is
    longer than its step (the recomputed forward is backward's)."""
    own, s, steps = _run(tmp_path, "reentrant")
    assert s["count"] == own["steps"]
    assert s["phases_s"]["forward/other"] > 0 and s["phases_s"]["backward"] > 0
    for st in steps:
        assert st.data + st.backward + st.optimizer <= st.duration + 1e-6
        assert st.duration - st.backward - st.optimizer > 0  # the forward is there


def test_autograd_grad_loop_finds_its_steps(tmp_path):
    own, s, _ = _run(tmp_path, "grad")
    assert s["count"] == own["steps"]
    assert s["phases_s"]["backward"] > 0


def test_producer_thread_data_wait_is_before_forward_not_the_producers(tmp_path, monkeypatch):
    """The loop waited on queue.get(): its wait before each forward (from the optimizer
    step, so with its sleep), none of the producer thread's DataLoader time. (The
    plain-Python build, for its own twins of the thread and nesting primitives.)"""
    monkeypatch.setenv("PERFTOP_PURE", "1")
    own, s, steps = _run(tmp_path, "producer")
    assert s["count"] == own["steps"]
    assert s["data_wait_source"] == "before_forward" and s["data_wait_fraction"] > 0
    waits = [(st.index, round(st.data, 4)) for st in steps]  # (what a failure shows)
    # the 30 ms sleep after opt.step() and the get: at least the sleep's time off the CPU,
    # by the thread's own clocks (29.8 ms beside two spinning processes, 30.0-30.1 idle:
    # under load the thread's CPU clock gains up to 0.2 ms in a sleep, in both). Each side
    # reads its two clocks one after the other at each end: a slow read of the CPU clock
    # (a system call, tens of µs at times on a busy VM) is CPU time in one side's window
    # that is not in the other's, hence the 0.3 ms (before perftop read its CPU clock with
    # its wall clock, its own work after the forward's start was taken off too: 34 µs). A
    # loaded CI host's CPU clock gained that much in perftop's window around one sleep of
    # 30 ms (29.97 ms off the CPU against the job's 30.09 ms in its window inside it).
    assert len(own["slept_s"]) == len(steps)
    short = [(st.index, st.data, off) for st, off in zip(steps[1:], own["slept_s"])
             if st.data < off - 3e-4]  # fmt: skip
    assert not short, (short, waits)
    assert min(own["slept_s"]) >= 0.025, own["slept_s"]  # the premise: each slept, off the CPU


def test_threads_async_checkpoint_then_training_on_a_non_main_thread(tmp_path):
    """Sixty steps on main while another thread saves ten times (the saves overlap the
    steps and cut none out of the run), then ten steps on a thread of their own."""
    d = tmp_path / "t"
    d.mkdir()
    proc, r = run_and_report(d, sys.executable, SHAPES, "async-save", "thread")
    assert proc.returncode == 0, proc.stderr
    own = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith('{"shape"')]
    steps = [e for e in read_events(str(d / "r.perftop")) if isinstance(e, Step)]
    s = r["steps"]
    assert s["count"] == sum(o["steps"] for o in own) == 70
    between = s["between_s"]
    assert "checkpoint" not in between and between["checkpoint_overlapped"]["count"] == 10
    main = steps[:60]
    covered = main[-1].t1 - main[0].t0
    assert sum(st.duration for st in main) >= 0.95 * covered  # no hole cut out of the run
    assert all(st.data > 0 for st in steps[61:])  # the thread's own DataLoader waits


def test_no_grad_evaluation_and_sampling_are_between_steps(tmp_path):
    """estimate_loss() (over in-memory tensors) at iterations 0, 20, 40 and a 500-token
    sampling pass at 10, 30, 50: each pass after training began is an eval interval as
    long as the job's own timer says; the checkpoint after it has its own time."""
    own, s, steps = _run(tmp_path, "eval")
    assert s["count"] == own["steps"]
    ev, ck = s["between_s"]["eval"], s["between_s"]["checkpoint"]
    assert ev["count"] == own["evals"] - 1 + own["samples"]  # the first is before step 1
    per_eval = own["eval_s"] / own["evals"]
    job = own["sample_s"] + own["eval_s"] - per_eval
    assert 0.7 * job <= ev["total_s"] <= job * 1.3 + 0.05, (ev, own)
    assert ck["count"] == 3 and ck["total_s"] <= own["save_s"] * 1.5 + 0.01
    # The passes are outside the steps, not inside them as well: steps and intervals tile
    # the run once.
    # (The checkpoint after the evaluation at iteration 0 comes before the first step.)
    covered = steps[-1].t1 - steps[0].t0
    inside = [
        b for b in read_events(str(tmp_path / "eval" / "r.perftop")) if isinstance(b, Between)
    ]
    outside = sum(b.length for b in inside if b.t0 + b.length <= steps[0].t0 + 1e-6)
    tiled = sum(st.duration for st in steps) + ev["total_s"] + ck["total_s"] - outside
    assert 0.9 * covered <= tiled <= covered + 0.01, (tiled, covered, outside)


def test_compiled_optimizer_step_compiles_as_without_perftop(tmp_path):
    """Dynamo's own counters (graphs, graph breaks) and outcomes, with and without."""
    plain = run_plain([sys.executable, SHAPES, "compiled"], cwd=tmp_path, timeout=300)
    assert plain.returncode == 0, plain.stderr
    d = tmp_path / "p"
    d.mkdir()
    proc, _ = run_and_report(d, sys.executable, SHAPES, "compiled")
    assert proc.returncode == 0, proc.stderr
    assert _own(proc.stdout) == _own(plain.stdout)
    assert "perftop" not in proc.stderr.split("perftop: exited")[0]  # no logged error of ours
    assert _own(plain.stdout)["opt"]["unique_graphs"] >= 1
