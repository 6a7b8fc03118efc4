"""A loop whose training loader's workers start anew each epoch, with an evaluation over a
loader of its own workers after each epoch (tests/workloads/epoch_eval_workers.py), under
``perftop run``: each step's data wait and forward, against the job's own timers around
its ``next()`` and its forward. The training loader's last call of an epoch (its
``StopIteration``, which joins its workers: 10-20 ms) falls inside the evaluation's
interval; it was counted again in the next step's data wait, whose forward then read 0
(found trying Lightning Fabric as a user would)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from perftop.events import Step
from perftop.recording import read_events
from tests.helpers import WORKLOADS

pytestmark = pytest.mark.timeout(180)


def test_the_step_after_an_evaluation_keeps_its_own_data_wait_and_forward(tmp_path) -> None:
    rec = tmp_path / "r.perftop"
    mon = subprocess.run(
        [sys.executable, "-m", "perftop", "run", "--headless", "--record", str(rec), "--",
         sys.executable, str(WORKLOADS / "epoch_eval_workers.py"), "3"],
        cwd=tmp_path, text=True, capture_output=True, timeout=150,
        stdin=subprocess.DEVNULL)  # fmt: skip
    assert mon.returncode == 0, mon.stderr[-3000:]
    own = json.loads(mon.stdout.strip().splitlines()[-1])
    assert own["evals"] == 3 and len(own["steps"]) == 30
    steps = {ev.index: ev for ev in read_events(rec) if isinstance(ev, Step)}
    assert sorted(steps) == list(range(30))
    for index, fetch, forward in own["steps"]:
        s = steps[index]
        # perftop times the loader's __next__ inside the job's own timer around next()
        assert s.data <= fetch + 0.001, (index, s, fetch)
        assert s.data >= 0.8 * fetch - 0.001, (index, s, fetch)
        # the rest of the step holds its forward (and the loss, zero_grad)
        assert s.other >= 0.8 * forward, (index, s, forward)
