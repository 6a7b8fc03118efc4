"""A training process that ends without perftop's last send (``os._exit``, a signal that
kills it) lost its last steps: the report and the summary say so, on a real run; a clean
exit, and a recording from before hooks sent a last event, say nothing."""

from __future__ import annotations

import sys

from perftop.report.build import build_report
from tests.helpers import WORKLOADS, closing_session, run_and_report

STEPS = 8000  # about a second: some of them sent before the exit


def test_os_exit_says_its_last_steps_are_missing(tmp_path):
    proc, rep = run_and_report(
        tmp_path, sys.executable, str(WORKLOADS / "hard_exit.py"), str(STEPS)
    )
    assert proc.returncode == 0 and f"steps {STEPS}" in proc.stdout, proc.stderr
    (pid,) = rep["steps"]["cut_short"]
    assert rep["steps"]["pid"] == pid
    said = [ln for ln in proc.stderr.splitlines() if "ended without perftop's last send" in ln]
    assert len(said) == 1 and f"pid {pid}" in said[0], proc.stderr
    # what the hook had not sent yet is missing: the count is the steps that came
    assert 0 < rep["steps"]["count"] <= STEPS


def test_a_clean_exit_says_nothing(tmp_path):
    proc, rep = run_and_report(
        tmp_path, sys.executable, str(WORKLOADS / "hard_exit.py"), "2000", "clean"
    )
    assert proc.returncode == 0, proc.stderr
    assert rep["steps"]["cut_short"] == [] and rep["steps"]["count"] == 2000
    assert "last send" not in proc.stderr


def _session(closes: bool, close: bool, ended: bool = True) -> dict:
    return build_report(closing_session(closes, close, ended))["steps"]


def test_only_a_hook_that_sends_a_last_event_and_did_not_is_cut_short():
    assert _session(closes=True, close=False)["cut_short"] == [42]
    assert _session(closes=True, close=True)["cut_short"] == []
    assert _session(closes=False, close=False)["cut_short"] == []  # an older hook
    assert _session(closes=True, close=False, ended=False)["cut_short"] == []  # still running


def test_the_line_names_every_process_cut_short():
    from perftop.report.build import cut_short_text

    assert cut_short_text([7]).startswith("pid 7 ended") and "its last steps" in cut_short_text([7])
    two = cut_short_text([7, 8])
    assert two.startswith("pid 7, pid 8 ended") and "their last steps" in two
