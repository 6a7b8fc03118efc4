"""A loop with no backward() and no optimizer (inference over a DataLoader): its steps are
the batches, and the report says so, with no backward phase of 0 and no update said to be
in forward/other (mmengine's ``runner.test()`` read as "the update (a hand-written one,
Keras's) is in forward/other")."""

from __future__ import annotations

import json
import sys

from tests.helpers import WORKLOADS, perftop, run_and_report


def test_an_inference_loop_has_no_backward_or_update(tmp_path) -> None:
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "inference_loop.py"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    s = rep["steps"]
    assert s["count"] == own["batches"] == 40
    assert set(s["phases_s"]) == {"data", "forward/other"}, s["phases_s"]
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    assert "no backward() and no torch.optim step: each step is a DataLoader batch" in text
    assert "the update" not in text, text
