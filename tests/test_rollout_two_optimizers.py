"""Rollouts between the iterations of a loop with two optimizers (an actor-critic's): each is
a ``rollout`` pass, every iteration, whether the policy runs under ``no_grad`` or in eval
mode with grad on, and right after an evaluation over a DataLoader. The second optimizer's
work keeps the step open past the first's step (which closes steps): from the second
rollout on, each was taken for the step's own work (met in the step before), and after an
evaluation its batches hid that the iteration had ended (1 of 40 rollouts found, and 0 of
8 after an evaluation)."""

from __future__ import annotations

import json
import sys

import pytest

from perftop.events import Between
from perftop.recording import read_events
from tests.helpers import WORKLOADS, run_and_report


@pytest.mark.parametrize("shape", ["eval_mode", "no_grad", "after_eval"])
def test_each_rollout_after_the_second_optimizer_is_a_pass(tmp_path, shape) -> None:
    job = str(WORKLOADS / "two_optimizer_rollouts.py")
    proc, rep = run_and_report(tmp_path, sys.executable, job, shape)
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rep["steps"]["count"] == own["iterations"] == 40
    passes = [e for e in read_events(tmp_path / "r.perftop") if isinstance(e, Between)]
    rollouts = [p for p in passes if p.kind == "rollout"]
    assert len(rollouts) == own["rollouts"], passes
    assert all("two_optimizer_rollouts.py" in p.site for p in rollouts), rollouts
    assert sum(p.kind == "eval" for p in passes) == own["evaluations"], passes


def test_an_evaluation_over_the_training_loader_in_a_loop_marking_its_steps(tmp_path) -> None:
    """A GAN's two optimizers and ``perftop.step()``: the second optimizer's step in the
    first iteration (before the first ``perftop.step()``) left a mark that no later step
    cleared, and every evaluation over the training loader was read as the next step's
    batches and forwards (0 of 6 passes; the step after each one as long as it)."""
    job = str(WORKLOADS / "explicit_gan_eval.py")
    proc, rep = run_and_report(tmp_path, sys.executable, job)
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rep["steps"]["count"] == own["steps"] == 128
    passes = [e for e in read_events(tmp_path / "r.perftop") if isinstance(e, Between)]
    assert [p.kind for p in passes] == ["eval"] * len(own["evals"]) == ["eval"] * 6, passes
    for p, (_, took) in zip(passes, own["evals"]):
        # its own timer's length, or a little more: a pass with grad off ends at the next
        # training activity (the next iteration's batch)
        assert took * 0.9 - 0.0005 <= p.length <= took + 0.05, (p, took)
        assert "explicit_gan_eval.py" in p.site, p
