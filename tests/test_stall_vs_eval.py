"""An evaluation between steps is no stalled step: the hook says when one begins
(``BetweenOpen``), and the stall watch leaves it alone, unless it runs far longer than the
earlier ones of its kind: then its stacks are captured and it is called a hang."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers import WORKLOADS, perftop, run_and_report


def test_a_long_evaluation_is_not_a_stall(tmp_path: Path) -> None:
    proc, report = run_and_report(
        tmp_path, sys.executable, str(WORKLOADS / "eval_pauses.py"), "10", "2.5,2.5"
    )
    assert proc.returncode == 0, proc.stderr
    assert report["steps"]["count"] == 20
    ev = report["steps"]["between_s"]["eval"]
    assert ev["count"] == 2 and 4.9 <= ev["total_s"] <= 6.0, ev
    assert report["stalls"] == [], report["stalls"]  # 2.5 s > 5x the median and 2 s


def test_an_evaluation_far_longer_than_the_earlier_ones_is_a_hang(tmp_path: Path) -> None:
    proc, report = run_and_report(
        tmp_path, sys.executable, str(WORKLOADS / "eval_pauses.py"), "10", "0.3,0.3,3.5"
    )
    assert proc.returncode == 0, proc.stderr
    stalls = report["stalls"]
    assert len(stalls) == 1, stalls
    hang = stalls[0]
    assert hang["during"] == "eval" and hang["step"] == 30, hang
    assert 2.0 <= hang["stalled_s"] <= 3.5 and abs(hang["median_s"] - 0.3) < 0.1, hang
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    assert "evaluation after step 30 of pid" in text and "hung " in text, text


def test_a_long_checkpoint_is_not_a_stall(tmp_path: Path) -> None:
    """A checkpoint is known as one from its first save's start (a multi-GB model's file
    takes seconds to write): its save running 3 s, 100x the median step, is no stalled
    step, and the checkpoint holds the save's time."""
    proc, report = run_and_report(
        tmp_path, sys.executable, str(WORKLOADS / "slow_save.py"), "40", "3"
    )
    assert proc.returncode == 0, proc.stderr
    assert report["steps"]["count"] == 80
    own = float(next(ln for ln in proc.stdout.splitlines() if ln.startswith("save")).split()[1])
    cp = report["steps"]["between_s"]["checkpoint"]
    assert cp["count"] == 1 and own - 0.05 <= cp["total_s"] <= own + 1e-5, (cp, own)
    assert report["stalls"] == [], report["stalls"]
