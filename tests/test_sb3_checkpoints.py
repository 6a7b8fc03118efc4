"""stable-baselines3's ``CheckpointCallback`` in a real DQN run (a save of the model's zip
and of its replay buffer every 100 environment steps, in a rollout): each save is one
checkpoint, as long as the job's own timer of the callback's save. SB3 serializes the
model's attributes and system information around its parameters' ``torch.save`` and
pickles the replay buffer: only the ``torch.save`` calls were seen, 4-6 of each 7-9 ms
read as the rollout's."""

from __future__ import annotations

import json
import sys

from perftop.events import Between
from perftop.recording import read_events
from tests.helpers import WORKLOADS, needs, run_and_report


def test_each_checkpoint_callback_save_is_one_checkpoint(tmp_path) -> None:
    needs("stable_baselines3")
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "sb3_checkpoint.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rep["steps"]["count"] == own["updates"] > 100
    got = [e for e in read_events(tmp_path / "r.perftop") if isinstance(e, Between)]
    saves = [e.length for e in got if e.kind == "checkpoint"]
    assert len(saves) == len(own["save_s"]) == 6, got
    assert {e.kind for e in got} == {"checkpoint", "rollout"}
    for mine, want in zip(saves, own["save_s"], strict=True):
        # inside the callback's timer (its own lines: the path, the checks), less no more
        # than those lines
        assert 0.8 * want - 0.002 <= mine <= want + 0.0005, (saves, own["save_s"])
