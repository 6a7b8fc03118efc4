"""A job run with warnings as errors (``-W error``, ``-X dev``) behaves under perftop as
without it: a forked DataLoader worker used to drop the parent's connection unclosed, and
its ResourceWarning printed an "Exception ignored" traceback from every worker."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import WORKLOADS, run_and_report

# -X dev -W error: the warnings as errors (the later -W wins over dev mode's "default"
# filter) and dev mode's own checks on top; a run with -W error alone checked no more.
FLAGS = [("-X", "dev", "-W", "error")]


@pytest.mark.parametrize("flags", FLAGS, ids=["X-dev"])
def test_workers_under_warnings_as_errors_print_what_they_print_alone(tmp_path, flags):
    job = [sys.executable, *flags, str(WORKLOADS / "loader_train.py"), "12"]
    plain = subprocess.run(job, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    proc, rep = run_and_report(tmp_path, *job)
    assert proc.returncode == plain.returncode == 0, proc.stderr
    assert proc.stdout == plain.stdout
    job_err = [ln for ln in proc.stderr.splitlines() if ln and not ln.startswith("perftop:")]
    assert job_err == [ln for ln in plain.stderr.splitlines() if ln], proc.stderr
    assert rep["steps"]["count"] == 12 and len(rep["loaders"][0]["workers"]) == 2
