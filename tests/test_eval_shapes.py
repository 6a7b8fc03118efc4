"""Evaluations on every loop shape (issue 30 item 2), real trainings under ``perftop run``
compared with each loop's own timers (tests/workloads/eval_shapes.py): a loop with no
optimizer object and an LBFGS loop. Each pass appears once, between steps, within 10% of
the loop's own time; none stays inside a step; a pass after the last step counts too."""

from __future__ import annotations

import csv
import json
import sys
from typing import Any

import pytest

from perftop.events import Between, Step
from perftop.recording import read_events
from tests.helpers import WORKLOADS, perftop, run_and_report
from tests.test_replay_cli import check_trace_format

SHAPES = str(WORKLOADS / "eval_shapes.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = {}
    for shape in ("manual", "lbfgs", "val_loader", "epoch_valid", "grad_valid", "clock_step"):
        d = tmp_path_factory.mktemp(shape)
        proc, rep = run_and_report(d, sys.executable, SHAPES, shape)
        assert proc.returncode == 0, proc.stderr
        own = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("{")))
        steps = [e for e in read_events(str(d / "r.perftop")) if isinstance(e, Step)]
        out[shape] = (own, rep, steps)
    return out


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= max(0.1 * want, 0.002 * 5)


def _each_pass_once(own: dict, rep: dict, steps: int, passes: int) -> dict:
    """The loop's steps, and its evaluations as that many passes holding their own time;
    the report's ``eval`` row."""
    s = rep["steps"]
    assert s["count"] == own["steps"] == steps
    ev = s["between_s"]["eval"]
    assert ev["count"] == len(own["evals"]) == passes, s["between_s"]
    assert _close(ev["total_s"], sum(own["evals"])), (ev, own["evals"])
    return ev


def test_manual_update_loop_each_evaluation_between_steps(runs):
    """No torch.optim: four evaluate() after each epoch's last step and a final test
    pass: five evaluations, none folded into a step; the two after the last step, with no
    training between them, are one pass (one stretch outside steps); the save after the
    loop is a checkpoint."""
    own, rep, steps = runs["manual"]
    s = rep["steps"]
    assert s["count"] == own["steps"] == 120
    ev = s["between_s"]["eval"]
    assert len(own["evals"]) == 5
    assert ev["count"] == 4, s["between_s"]
    assert _close(ev["total_s"], sum(own["evals"])), (ev, own["evals"])
    assert s["between_s"]["checkpoint"]["count"] == 1
    for st in steps:  # no pass in a step (a step's length is no test: a preempted one
        # took 26 ms on CI, half the shortest evaluation)
        for t0, t1 in own["eval_at"]:
            assert min(st.t1, t1) - max(st.t0, t0) < 0.5 * (t1 - t0), (st, t0, t1)


def test_lbfgs_each_prediction_once_between_steps(runs):
    """optimizer.step(closure) then a no_grad prediction: each of the six is an
    evaluation, and its sync line is counted between steps only, not as a step's."""
    own, rep, steps = runs["lbfgs"]
    _each_pass_once(own, rep, 6, 6)
    mine = [r for r in rep.get("sync_events") or [] if r["file"].endswith("eval_shapes.py")]
    assert mine == []
    between = [r for r in rep.get("sync_between") or [] if r["file"].endswith("eval_shapes.py")]
    assert len(between) == 1


def test_a_pass_its_batches_open_ends_at_its_last_work_not_at_the_exit(runs):
    """Evaluations over a validation DataLoader (each opened by its first batch, fetched
    with grad off), the last one after the last step, then a save and an idle second
    before the exit: each evaluation holds its own time, and the idle is in no pass."""
    own, rep, steps = runs["val_loader"]
    ev = _each_pass_once(own, rep, 128, 4)
    s = rep["steps"]
    # named by the function whose module call came first in it, as a forward's pass is
    assert ev["site"].startswith("evaluate (eval_shapes.py:"), ev
    ck = s["between_s"]["checkpoint"]
    assert ck["count"] == 1 and _close(ck["total_s"], sum(own["saves"])), (ck, own["saves"])


def test_a_validation_with_grad_on_is_a_pass_however_fast_its_forwards(runs):
    """The same evaluations with grad on (the model in eval mode, no ``no_grad``), each
    batch's forward well under a millisecond: a batch of a loader that never fed training,
    then a forward, then its next batch with no training between is an evaluation. They
    had read as a prefetching wrapper's read ahead (the next batch within 1 ms): inside
    the steps after them, their batches the steps' data wait."""
    own, rep, steps = runs["grad_valid"]
    _each_pass_once(own, rep, 128, 4)
    assert max(st.t1 - st.t0 for st in steps) < min(own["evals"]), own["evals"]


def test_an_epochs_end_after_its_validation_is_the_pass_not_the_next_batch(runs):
    """skorch's loop: a validation whose batches come with grad on (the forward under
    ``no_grad``), then the epoch's end (50 ms of scoring and printing), then the next
    epoch's first batch from the training loader. The validation loader's end and the
    epoch's end are the pass's: each pass holds the loop's own time for them, and the
    next epoch's first step waits only for its own batch (it was booked everything from
    the validation's last batch on: 50 ms of data wait a step, the passes 50 ms short)."""
    own, rep, steps = runs["epoch_valid"]
    _each_pass_once(own, rep, 128, 4)
    steps = sorted(steps, key=lambda st: st.t0)
    for i in (32, 64, 96):  # each epoch's first step after a validation
        assert steps[i].data < own["fetch"][i] + 0.015, (i, steps[i], own["fetch"][i])


def test_the_exports_show_each_pass_where_the_loop_timed_it(runs, tmp_path):
    """The Chrome trace has each pass as an event of its kind, on a thread of its
    process's track, over the loop's own timing of it; between.csv has the same rows; both
    add up to the report's ``between_s``."""
    own, rep, _steps = runs["val_loader"]
    rec = rep["record_path"]
    trace_path, out = tmp_path / "t.json", tmp_path / "csv"
    r = perftop("export", rec, "--chrome-trace", str(trace_path), "--csv", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trace = json.loads(trace_path.read_text())
    check_trace_format(trace)
    events = trace["traceEvents"]
    # (a gap of 0.1 s or more between two steps is a "between steps" event on the steps'
    # own thread, as before: a slow machine's evaluations are)
    passes = [
        e for e in events
        if e.get("cat") == "between" and e["ph"] == "X" and e["name"] != "between steps"
    ]  # fmt: skip
    with open(out / "between.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for kind, want in rep["steps"]["between_s"].items():
        got = [e["dur"] / 1e6 for e in passes if e["name"] == kind]
        assert len(got) == want["count"] and abs(sum(got) - want["total_s"]) < 1e-5, kind
        lengths = [float(r["length_s"]) for r in rows if r["kind"] == kind]
        assert len(lengths) == want["count"] and abs(sum(lengths) - want["total_s"]) < 1e-5
    start = trace["otherData"]["start_t"]
    evals = sorted((e for e in passes if e["name"] == "eval"), key=lambda e: e["ts"])
    for e, (w0, w1) in zip(evals, own["eval_at"], strict=True):
        a, b = start + e["ts"] / 1e6, start + (e["ts"] + e["dur"]) / 1e6
        assert min(b, w1) - max(a, w0) > 0.9 * (w1 - w0), (e, w0, w1)  # the same stretch
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {names[(e["pid"], e["tid"])] for e in passes} == {
        "between steps: eval", "between steps: checkpoint"
    }  # fmt: skip
    steps_tid = {(e["pid"], e["tid"]) for e in events if e.get("cat") == "step"}
    assert not steps_tid & {(e["pid"], e["tid"]) for e in passes}


def test_passes_follow_a_system_clock_set_forward_mid_run(runs):
    """The system clock set 0.5 s forward between the first two evaluations (a VM's clock
    after a pause or a migration; here the job's own process's): each evaluation, before
    and after, is where the loop's own ``time.time()`` timed it. (Set right at the first
    one's end, it read 0.5 s late in CI: a pass that ends before the hook's next send
    after the clock was set may carry either time, docs/steps.md.) The hook stamped everything
    with the offset read at its start, and every pass after a 61 ms step read 61 ms
    early (CI: an evaluation 9.5 ms, a rollout 61 ms before the loop's own start)."""
    own, rep, _steps = runs["clock_step"]
    _each_pass_once(own, rep, 128, 4)
    passes = sorted(
        (e for e in read_events(rep["record_path"]) if isinstance(e, Between) and e.kind == "eval"),
        key=lambda e: e.t0,
    )
    assert len(passes) == len(own["eval_at"]) == 4, passes
    for p, (w0, w1) in zip(passes, own["eval_at"], strict=True):
        a, b = p.t0, p.t0 + p.length
        assert min(b, w1) - max(a, w0) > 0.9 * (w1 - w0), (p, w0, w1)
