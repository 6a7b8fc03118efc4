"""An evaluation under ``no_grad`` right after a log line that calls modules with grad on
(a ``weight_norm`` weight's parametrization, a GP constraint's ``Softplus``: GPyTorch's
lengthscale printed after ``optimizer.step()``): the first module call since the update
was taken for the next step's forward, so the evaluation was the step's own work (no
pass, its time in that step). Such calls begin no training forward now."""

from __future__ import annotations

import json
import sys

from perftop.events import Step
from perftop.recording import read_events
from tests.helpers import WORKLOADS, run_and_report


def test_an_evaluation_after_a_log_lines_module_calls_is_a_pass(tmp_path) -> None:
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "log_after_step.py"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = json.loads(proc.stdout.splitlines()[-1])
    assert rep["steps"]["count"] == own["steps"] == 200
    evals = rep["steps"]["between_s"].get("eval")
    assert evals is not None and evals["count"] == len(own["evals"]) == 4, rep["steps"]
    # its time is the evaluations' (at least their forwards', as the loop timed them)
    assert evals["total_s"] >= 0.9 * sum(own["evals"]), (evals, own["evals"])
    # and no step holds one: a step of an evaluation's length is the scheduler's (a loaded
    # host preempts a 1 ms step for 10 ms now and then), not one an evaluation each
    steps = [e for e in read_events(str(tmp_path / "r.perftop")) if isinstance(e, Step)]
    long = sorted(e.duration for e in steps if e.duration >= min(own["evals"]))
    assert len(steps) == 200 and len(long) < len(own["evals"]), (long, own["evals"])
