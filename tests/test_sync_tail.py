"""The syncs after a job's last step: its last iteration's log line, after the optimizer's
step that ended the step, came in no step and was counted nowhere (the HF Trainer's loss
log read 5 of its 6 with ``PERFTOP_SYNC=all``; TRL 7 of 8, tianshou 71 of 72). They are
counted now, in no step's rate; a line seen only there has none (it read 4.00 a step for
4 syncs after the loop, and the sync hint 5.0 a step where the loop made 0.1)."""

from __future__ import annotations

import json
import sys

from tests.helpers import WORKLOADS, perftop, run_and_report


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
    final = next(r for r in rep["sync_events"] if r["line"] == own["final_line"])
    assert final["count"] == 4 and final["per_step"] == 0.0 and final["seen_steps"] == 0, final
    # 0.08 a step is under the sync hint's bar; the 4 after the loop, read as 4.00 a step,
    # made it say "5.0 per step"
    assert not [h for h in rep["hints"] if h["id"] == "host-device-sync"], rep["hints"]
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    row = next(ln for ln in text.splitlines() if f"tail_log.py:{own['final_line']} " in ln)
    assert "in 0 of 59 watched steps" in row and row.split()[-1] == "4", row
