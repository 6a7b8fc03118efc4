"""A loop whose training loader's workers start anew each epoch, with an evaluation over a
loader of its own workers after each epoch (tests/workloads/epoch_eval_workers.py), under
``perftop run``: each step's data wait and forward, against the job's own timers around
its ``next()`` and its forward. The training loader's last call of an epoch (its
``StopIteration``, which joins its workers: 10-20 ms) falls inside the evaluation's
interval; it was counted again in the next step's data wait, whose forward then read 0
(found trying Lightning Fabric as a user would). Each evaluation reads its scores on the
host: the passes watched for syncs are placed after the step before them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perftop.events import Between, LoaderInfo, Step, SyncBatch
from perftop.recording import read_events
from tests.helpers import WORKLOADS, perftop

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list, Path]:
    d = tmp_path_factory.mktemp("evw")
    rec = d / "r.perftop"
    mon = subprocess.run(
        [sys.executable, "-m", "perftop", "run", "--headless", "--record", str(rec), "--",
         sys.executable, str(WORKLOADS / "epoch_eval_workers.py"), "3"],
        cwd=d, text=True, capture_output=True, timeout=150,
        stdin=subprocess.DEVNULL)  # fmt: skip
    assert mon.returncode == 0, mon.stderr[-3000:]
    return json.loads(mon.stdout.strip().splitlines()[-1]), list(read_events(rec)), rec


def test_the_step_after_an_evaluation_keeps_its_own_data_wait_and_forward(run) -> None:
    own, events, _rec = run
    assert own["evals"] == 3 and len(own["steps"]) == 30
    steps = {ev.index: ev for ev in events if isinstance(ev, Step)}
    assert sorted(steps) == list(range(30))
    for index, fetch, forward in own["steps"]:
        s = steps[index]
        # perftop times the loader's __next__ inside the job's own timer around next()
        assert s.data <= fetch + 0.001, (index, s, fetch)
        # the rest of the step holds its forward (and the loss, zero_grad)
        assert s.other >= 0.8 * forward, (index, s, forward)
    # and nearly all of that timer (a busy host may preempt the job between its clock
    # read and the call: 2 ms of one step's 3 once on CI)
    fetched = sum(f for _i, f, _fw in own["steps"])
    assert sum(steps[i].data for i in steps) >= 0.8 * fetched - 0.005, fetched


def test_a_pass_watched_on_its_own_draw_is_placed_after_the_step_before_it(run) -> None:
    """The first two passes are watched for sure, out of the steps' sampling (steps 1-3,
    then a few): their syncs went out under the last step the detector had looked at
    (``sync_between[].last_step`` 12 for a pass after step 60), not the step before them."""
    _own, events, _rec = run
    ends = sorted((ev.t1, ev.index) for ev in events if isinstance(ev, Step))
    passes = [ev for ev in events if isinstance(ev, Between) and ev.kind == "eval"]
    alone = [ev for ev in events if isinstance(ev, SyncBatch) and ev.passes and not ev.sampled]
    assert passes and alone, (passes, alone)
    before = [max(i for t1, i in ends if t1 <= p.t0 + 1e-6) for p in passes]
    # (a pass inside a watched stretch of steps goes out with them: not one of these)
    steps = [b.step for b in alone]
    assert set(steps) <= set(before) and steps == sorted(set(steps)), (alone, before)
    assert all(b.between for b in alone)  # each with its int() syncs


def test_a_slice_holds_only_the_loaders_and_processes_of_its_steps(run, tmp_path) -> None:
    """``report --from-step 11 --to-step 20`` (the second epoch) listed every loader and
    worker of the run, those made after it as rows of N/A, said "no end recorded" of a
    run that exited 0, and "ran" the whole run's time."""
    _own, events, rec = run
    out = perftop("report", "--json", "--from-step", "11", "--to-step", "20", str(rec),
                  cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    steps = sorted((ev.index, ev.t0, ev.t1) for ev in events if isinstance(ev, Step))[10:20]
    assert r["steps"]["count"] == 10
    assert r["duration_s"] <= steps[-1][2] - steps[0][1] + 0.05, r["duration_s"]
    # the training loader only: the first evaluation's ended before, the second's came after
    assert [ld["loader_id"] for ld in r["loaders"]] == [0], r["loaders"]
    train = [ev for ev in events if isinstance(ev, LoaderInfo) and ev.loader_id == 0]
    second = {pid for _w, pid in train[1].workers}  # the second epoch's iterator's workers
    workers = {p["pid"] for p in r["processes"] if p["role"] == "worker"}
    assert workers <= second, (workers, second)
    text = perftop("report", "--from-step", "11", "--to-step", "20", str(rec), cwd=tmp_path)
    assert "the run went on after this slice" in text.stdout and "no end" not in text.stdout
