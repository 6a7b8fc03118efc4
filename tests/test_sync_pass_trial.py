"""A pass whose batches are fetched with grad on, each forward under ``no_grad`` (HF's
evaluation loop, mmengine's ValLoop): the pass is known at its second batch (the first
could have been the next step's, a teacher's forward after it), so a watch drawn for it
began there and read 7 syncs a pass where the loop made 8 (peft and mmengine both). The
watch now begins at the first forward on trial: kept where the pass is confirmed, dropped
where training follows (a teacher's forward in each step, whose sync stays the step's)."""

from __future__ import annotations

import json
import sys

import pytest

from perftop.events import Between, SyncBatch
from perftop.hook import sync_passes
from perftop.hook.sync_sampler import Sampler, unit
from perftop.recording import read_events
from tests.helpers import WORKLOADS, run_and_report

SCRIPT = str(WORKLOADS / "eval_grad_fetch.py")


def _run(tmp_path, shape: str, *env: str) -> tuple[dict, dict]:
    ckpt = str(tmp_path / "model.pt")
    proc, rep = run_and_report(tmp_path, "env", *env, sys.executable, SCRIPT, shape, ckpt)
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = json.loads(proc.stdout.splitlines()[-1])
    assert rep["steps"]["count"] == own["steps"] == 128
    return own, rep


def test_each_watched_pass_holds_its_first_batchs_sync(tmp_path) -> None:
    own, rep = _run(tmp_path, "eval")
    per_eval = own["eval_syncs"] / own["evals"]
    assert per_eval == 8
    rows = [r for r in rep["sync_between"] if r["line"] == own["lines"]["eval"]]
    assert len(rows) == 1, rep["sync_between"]
    row = rows[0]
    # the first two passes are watched for sure (budget allowing: a few ms each here)
    assert row["passes"] >= 2 and row["per_pass"] == per_eval, row
    assert row["count"] == per_eval * row["passes"], row
    assert not [r for r in rep["sync_events"] if r["line"] == own["lines"]["eval"]]


@pytest.mark.parametrize(("seed", "primed"), [("87", 17), ("137", 33)])
def test_a_pass_after_the_step_before_a_watched_one_is_watched(tmp_path, seed, primed) -> None:
    """Sessions whose draws watch step 17 (or 33) and none of the evaluation's passes after
    the first two: the detector primes (learns marks) in step 16 (or 32), and the pass
    after it opened while it primed. It was left unwatched, the first two passes' "for
    sure" included: 1 pass of 8 batches where 2 were (a CI run of the test above, its seed
    drawn at random). Now watched from the priming, which resumes at its end for the step
    watch it was for (still sent, with its weight)."""
    drawn, sampler = [], Sampler(seed=int(seed, 16))  # the job's defaults: early 3, every 200
    while len(drawn) < 9:
        drawn.append(sampler.draw(drawn[-1] + 1 if drawn else 4)[0])
    near = {16 * k + d for k in range(1, 9) for d in (0, 1)}  # a pass after 16k opens in it
    assert {i for i in drawn if i <= 128} & near == {primed}, drawn
    assert all(unit(n, sync_passes.SALT, int(seed, 16)) >= (2 / n) ** 2 for n in range(3, 9))
    own, rep = _run(tmp_path, "eval", f"PERFTOP_SYNC_SEED={seed}")
    (row,) = [r for r in rep["sync_between"] if r["line"] == own["lines"]["eval"]]
    assert row["passes"] == 2 and row["count"] == 16, row
    batches = [e for e in read_events(tmp_path / "r.perftop") if isinstance(e, SyncBatch)]
    assert primed in [e.step for e in batches if e.sampled], batches


def test_a_teachers_forward_in_each_step_stays_the_steps(tmp_path) -> None:
    # a step in four watched after the first three (the default: one in 200), its budget
    # ample: the steps after the teacher's first forward are watched
    own, rep = _run(tmp_path, "teacher", "PERFTOP_SYNC_EVERY=4", "PERFTOP_SYNC_BUDGET_US=5000")
    line = own["lines"]["teacher"]
    assert not rep["sync_between"], rep["sync_between"]
    batches = [e for e in read_events(tmp_path / "r.perftop") if isinstance(e, SyncBatch)]
    watched = {e.step: sum(s[5] for s in e.sites if s[2] == line) for e in batches if e.sampled}
    # each watched step made it once from step 20 on, none before: the trial's stretch of
    # step 20 (its first teacher's forward, a pass until training came) was dropped, not
    # counted in the next watched step
    assert watched == {i: int(i >= 19) for i in watched}, watched  # (its step 20: index 19)
    assert sum(watched.values()) >= 3, watched
    assert not any(s[2] == line for e in batches for s in e.between)


def test_an_evaluation_after_a_checkpoint_is_named(tmp_path) -> None:
    """A checkpoint's saves, then the evaluation (batches fetched with grad on): the
    evaluation's interval had the right length but no site and no forward time (its
    pending first batch kept the forward's region out of the checkpoint's gap)."""
    own, rep = _run(tmp_path, "checkpoint")
    events = list(read_events(tmp_path / "r.perftop"))
    evals = [e for e in events if isinstance(e, Between) and e.kind == "eval"]
    saves = [e for e in events if isinstance(e, Between) and e.kind == "checkpoint"]
    assert len(evals) == len(saves) == own["evals"] == 8, (evals, saves)
    for e in evals:
        assert e.site.startswith("<module> (eval_grad_fetch.py:") and 0 < e.forward_s <= e.length, e
