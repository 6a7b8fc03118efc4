"""A pass is named by the function that ran it, past a library's generic call wrappers."""

from __future__ import annotations

import json
import sys

from tests.helpers import WORKLOADS, run_and_report


def test_a_pass_through_a_librarys_call_wrappers_is_named_by_its_caller(tmp_path):
    """Keras 3 on the torch backend calls each model through ``Layer.__call__(*args,
    **kwargs)`` under a decorator's ``error_handler(*args, **kwargs)``: its evaluation was
    said to be "made from __call__ (layer.py:1002)", which says nothing; it is its
    ``test_step``, the function that called the wrappers (tests/workloads/wrapped_lib.py,
    a library of that shape, installed in a site-packages folder)."""
    proc, r = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "wrapped_lib.py"), ".")
    assert proc.returncode == 0, proc.stderr
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    s = r["steps"]
    assert s["count"] == own["steps"] == 30
    ev = s["between_s"]["eval"]
    assert ev["count"] == own["evals"] == 3, s["between_s"]
    assert ev["site"] == f"test_step (wrappedlib/trainer.py:{own['test_step_line']})", ev


def test_an_evaluation_at_a_call_site_the_steps_use_too_is_named(tmp_path):
    """GRPO's shape (TRL): each step generates with grad off at one call site, after its
    batch; its evaluation generates at the same site after its own loader's batch. That
    site is the steps' own work, so the evaluation's first forward there was not watched:
    its time was right, its name and forward share missing. A batch of a loader that never
    fed training makes it a pass's start again."""
    proc, r = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "generate_in_steps.py"))
    assert proc.returncode == 0, proc.stderr
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    s = r["steps"]
    assert s["count"] == own["steps"] == 64
    ev = s["between_s"]["eval"]
    assert ev["count"] == len(own["evals"]) == 3, s["between_s"]
    assert ev["site"] == f"generate (generate_in_steps.py:{own['generate_line']})", ev
    # perftop's interval also holds the epoch's turn around the job's timer (the next train
    # iterator made): ~1 ms each when quiet, 3.4 ms each on a loaded CI VM
    assert ev["forward_s"] > 0 and abs(ev["total_s"] - sum(own["evals"])) < 0.02, (ev, own)
