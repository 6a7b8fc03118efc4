"""An evaluation before the first training step whose batches are fetched with grad on
(MONAI's ``ValidationHandler(exec_at_start=True)``, an ignite evaluator's ``no_grad``
inside each iteration): its loader's end, before any training, ends a pass over it. The
first step is the training's own (it held the whole evaluation, 284 of its 406 ms in a
MONAI run, and the evaluation's batches as data wait)."""

from __future__ import annotations

import json
import sys

from perftop.events import Step
from perftop.recording import read_events
from tests.helpers import WORKLOADS, run_and_report


def test_an_evaluation_before_training_is_no_part_of_the_first_step(tmp_path) -> None:
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "eval_before_training.py"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    assert own["pre_eval_s"] > 0.1
    assert rep["steps"]["count"] == own["steps"] == 30
    first = next(e for e in read_events(tmp_path / "r.perftop") if isinstance(e, Step))
    assert first.index == 0
    # the job's own timer runs from before its first batch's fetch to its update; the step
    # may begin at the evaluation's end, before it (more by what the job waited for a core)
    assert first.t1 - first.t0 <= own["first_step_s"] + 0.002 + own["first_wait_s"], (first, own)
    assert first.data < 0.05, first
