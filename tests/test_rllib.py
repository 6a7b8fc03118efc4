"""RLlib (Ray 2.60's new API stack) under ``perftop run``: PPO on CartPole with its env
runner and learner in the driver (tests/workloads/rllib_ppo.py), checked against the job's
own counters. Every optimizer step is a step; each iteration's sampling after the first
update (two ``sample()`` calls of 200 env steps, RLlib's connector pipelines between the
policy's forward calls and the environment's ``step``: ~4,400 profile events before the
first) is one ``rollout`` pass named by the function that steps the environment, covering
both calls by the job's own timer (the first iteration's comes before any step: in no
interval). Its first rollouts had read as evaluations (the look for an environment's step
gave up first)."""

from __future__ import annotations

import json
import sys

from perftop.events import Between
from perftop.recording import read_events
from tests.helpers import WORKLOADS, needs, run_and_report

needs("ray.rllib", "gymnasium")


def test_ppo_steps_and_rollouts_against_its_own_counters(tmp_path):
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "rllib_ppo.py"), "3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = json.loads(proc.stdout.splitlines()[-1])
    assert rep["steps"]["count"] == own["steps"] == 39
    passes = [e for e in read_events(str(tmp_path / "r.perftop")) if isinstance(e, Between)]
    after = [s for s in own["samples"] if s[2] > 0]  # the samples after the first update
    pairs = [after[i : i + 2] for i in range(0, len(after), 2)]
    assert len(passes) == len(pairs) == 2, (passes, own["samples"])
    for p, ((a1, b1, _), (a2, b2, _)) in zip(passes, pairs, strict=True):
        assert p.kind == "rollout" and p.site.startswith(
            "_try_env_step (ray/rllib/env/env_runner.py:"
        ), p
        end = p.t0 + p.length
        # from the first sample's first forward to past the second's end (the pass runs to
        # the update's first forward with grad on: the learner's connectors before it)
        assert a1 <= p.t0 <= b1 and b2 - 0.001 <= end, (p, a1, b1, a2, b2)
        assert p.length <= 1.5 * (b2 - a1) + 0.05, (p, a1, b2)
    assert rep["steps"]["between_s"]["rollout"]["count"] == 2
    assert "eval" not in rep["steps"]["between_s"]
