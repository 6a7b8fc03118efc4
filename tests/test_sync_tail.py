"""The syncs after a job's last step: its last iteration's log line, after the optimizer's
step that ended the step, came in no step and was counted nowhere (the HF Trainer's loss
log read 5 of its 6 with ``PERFTOP_SYNC=all``; TRL 7 of 8, tianshou 71 of 72). They are
counted now, in no step's rate."""

from __future__ import annotations

import json
import sys

from tests.helpers import WORKLOADS, run_and_report


def test_the_last_iterations_log_after_its_step_is_counted(tmp_path) -> None:
    proc, rep = run_and_report(
        tmp_path, "env", "PERFTOP_SYNC=all", sys.executable, str(WORKLOADS / "tail_log.py")
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = json.loads(proc.stdout.splitlines()[-1])
    assert rep["steps"]["count"] == own["steps"] == 60
    row = next(r for r in rep["sync_events"] if r["line"] == own["line"])
    assert row["count"] == own["logs"] == 6, row
    # the rate is over the steps: each log is the next step's (after the update that ends
    # one), the last one's in none
    assert row["seen_steps"] == 5 and row["per_step"] == round(5 / row["watched_steps"], 4), row
    assert not rep["sync_between"], rep["sync_between"]
