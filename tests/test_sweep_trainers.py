"""Trainers that follow each other (a sweep's trials, a shell script's runs): the step
figures are of the trial training now, not of the first one long gone, and the job's rate
is no sum of rates of trials that never ran at the same time."""

from __future__ import annotations

import sys
from pathlib import Path

from perftop.events import Step
from perftop.hints import hinted_session
from perftop.model.trainers import rate_together
from perftop.recording import read_events
from perftop.tui.widgets.steps import stats_line
from perftop.wire import StepBatch
from tests.helpers import WORKLOADS, run_and_report


def test_a_sweeps_trials_show_the_one_training_now(tmp_path: Path) -> None:
    proc, report = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "sweep.py"), "2", "50")
    assert proc.returncode == 0, proc.stderr
    trials = [line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("trial ")]
    pids = [int(t[0]) for t in trials]
    assert len(pids) == 2 and [int(t[1]) for t in trials] == [50, 50], proc.stdout
    steps = report["steps"]
    assert steps["trainers"] == 2 and steps["total_count"] == 100, steps
    assert steps["one_after_another"] is True
    assert steps["pid"] == pids[-1]  # all ended: the last trial's figures
    # the run's rate: its steps over its step time, not three rates summed
    own = 100 / sum(float(t[2]) for t in trials)
    assert 0.8 * own < steps["total_steps_per_s"] < 1.25 * own, (steps, own)

    # live, half-way through the second trial: its figures and its rate alone
    session, seen = hinted_session(), 0
    for ev in read_events(tmp_path / "r.perftop"):
        session.apply(ev)
        if isinstance(ev, StepBatch):
            seen += sum(1 for r in ev.records() if r[0] == pids[1])
        elif isinstance(ev, Step):
            seen += ev.pid == pids[1]
        if seen >= 25:
            break
    snap = session.snapshot()
    assert snap.steps.pid == pids[1], (snap.steps.pid, pids)
    trainers = snap.independent_trainers()
    assert rate_together(snap.steps, trainers) == snap.steps.steps_per_s
    line = stats_line(snap.steps, trainers=trainers).plain
    assert "in 2 trainers" in line and "trainer 2 of 2" in line, line


def test_the_primary_trainer_by_the_rules() -> None:
    from perftop.model.trainers import one_after_another, primary

    ranks = [(10, 1, 0.0, 9.0), (11, 0, 0.0, 9.0)]
    assert primary(ranks, closed=()) == 11  # the lowest rank, whatever else
    hogwild = [(20, None, 0.0, 9.0), (21, None, 0.5, 9.5)]
    assert not one_after_another(hogwild)
    assert primary(hogwild, closed=()) == 20
    assert primary(hogwild, closed=(20, 21)) == 20  # all ended: still the first
    sweep = [(30, None, 0.0, 3.0), (31, None, 4.0, 7.0), (32, None, 8.0, 9.0)]
    assert one_after_another(sweep)
    assert primary(sweep[:2], closed=(30,)) == 31  # the one training now
    assert primary(sweep[:2], closed=()) == 31  # 30 was killed: 31 began after its end
    assert primary(sweep, closed=(30, 31, 32)) == 32  # all ended: the last
