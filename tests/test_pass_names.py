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
    assert ev["site"] == f"test_step (trainer.py:{own['test_step_line']})", ev
