"""Evaluations on every loop shape (issue 30 item 2), real trainings under ``perftop run``
compared with each loop's own timers (tests/workloads/eval_shapes.py): a loop with no
optimizer object and an LBFGS loop. Each pass appears once, between steps, within 10% of
the loop's own time; none stays inside a step; a pass after the last step counts too."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from perftop.events import Step
from perftop.recording import read_events
from tests.helpers import WORKLOADS, run_and_report

SHAPES = str(WORKLOADS / "eval_shapes.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = {}
    for shape in ("manual", "lbfgs", "val_loader"):
        d = tmp_path_factory.mktemp(shape)
        proc, rep = run_and_report(d, sys.executable, SHAPES, shape)
        assert proc.returncode == 0, proc.stderr
        own = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("{")))
        steps = [e for e in read_events(str(d / "r.perftop")) if isinstance(e, Step)]
        out[shape] = (own, rep, steps)
    return out


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= max(0.1 * want, 0.002 * 5)


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
    s = rep["steps"]
    assert s["count"] == own["steps"] == 6
    ev = s["between_s"]["eval"]
    assert ev["count"] == len(own["evals"]) == 6, s["between_s"]
    assert _close(ev["total_s"], sum(own["evals"])), (ev, own["evals"])
    mine = [r for r in rep.get("sync_events") or [] if r["file"].endswith("eval_shapes.py")]
    assert mine == []
    between = [r for r in rep.get("sync_between") or [] if r["file"].endswith("eval_shapes.py")]
    assert len(between) == 1


def test_a_pass_its_batches_open_ends_at_its_last_work_not_at_the_exit(runs):
    """Evaluations over a validation DataLoader (each opened by its first batch, fetched
    with grad off), the last one after the last step, then a save and an idle second
    before the exit: each evaluation holds its own time, and the idle is in no pass."""
    own, rep, steps = runs["val_loader"]
    s = rep["steps"]
    assert s["count"] == own["steps"] == 128
    ev = s["between_s"]["eval"]
    assert ev["count"] == len(own["evals"]) == 4, s["between_s"]
    assert _close(ev["total_s"], sum(own["evals"])), (ev, own["evals"])
    ck = s["between_s"]["checkpoint"]
    assert ck["count"] == 1 and _close(ck["total_s"], sum(own["saves"])), (ck, own["saves"])

