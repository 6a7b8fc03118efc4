"""Evaluation on the training loader is a pass, not part of a step (issue 44 item 4): a real
pytorch-ignite trainer under ``perftop run`` (tests/workloads/ignite_eval.py), checked
against ignite's own counters.

ignite's ``evaluator.run(train_loader)``, from an ``ITERATION_COMPLETED`` handler, fetches
its batches from the training loader with grad on and runs each forward in
``torch.no_grad()``: each run is one ``eval`` pass (the epoch-end evaluation on a
validation loader too, with ignite's checkpoint after it in the same interval), named by
the function that made its forward calls, its time within 10% + 0.5 ms of ignite's timer
around ``evaluator.run``; the steps are the trainer's
iterations, none of them holds an evaluation (no stall, no step near an evaluation's
length), the between-steps hint speaks, and the job's output is unchanged. The same
shapes by hand after it: an evaluation over the training loader's first batches is one
pass; a teacher's forward with grad off after each batch is its step's own work."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from perftop.events import Between
from perftop.recording import read_events
from tests.helpers import WORKLOADS, needs, run_and_report
from tests.plainrun import start_plain

needs("ignite")

SLEEP = 0.3  # an eval forward's sleep: 8 batches make a train-loader evaluation 2.4 s
ARGS = ("2", "8", "5", str(SLEEP))  # 2 epochs of 8 iterations, eval on train every 5


def _own(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ignite_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    d = tmp_path_factory.mktemp("ignite")
    script = str(WORKLOADS / "ignite_eval.py")
    # the same job without perftop (no sleep: the same numbers), run alongside
    (d / "plain").mkdir()
    plain = start_plain([sys.executable, script, *ARGS[:3], "0"], cwd=d / "plain")
    proc, rep = run_and_report(d, sys.executable, script, *ARGS)
    out = plain.communicate(timeout=120)[0]
    assert proc.returncode == 0 == plain.returncode, proc.stderr
    passes = [e for e in read_events(str(d / "r.perftop")) if isinstance(e, Between)]
    return _own(proc.stdout), rep, passes, _own(out)


def test_each_evaluator_run_is_one_eval_pass(ignite_run):
    own, rep, passes, _ = ignite_run
    evals = own["evals"]
    # at iterations 5, 8 (epoch end), 10, 15, 16: each alone between two steps
    assert [(w, i) for w, i, _ in evals] == [
        ("train", 5),
        ("val", 8),
        ("train", 10),
        ("train", 15),
        ("val", 16),
        ("hand", 3),  # the hand-written loop's, after its 4th step
    ]
    # an epoch's end holds its evaluation and ignite's checkpoint: one interval, each
    # kind's own time (the checkpoint's: inside torch.save, within the handler's call)
    saves = [p for p in passes if p.kind == "checkpoint"]
    assert len(saves) == len(own["saves"]) == 2, passes
    for p, length in zip(saves, own["saves"], strict=True):
        assert 0.0 < p.length <= length, (p, length)
    passes = [p for p in passes if p.kind != "checkpoint"]
    assert [p.kind for p in passes] == ["eval"] * len(evals), passes
    for p, (_, _, length) in zip(passes, evals, strict=True):
        assert length <= p.length <= 1.1 * length + 0.0005, (p, length)
    row = rep["steps"]["between_s"]["eval"]
    want = sum(length for *_, length in evals)
    assert row["count"] == len(evals)
    assert abs(row["total_s"] - want) <= 0.1 * want + 0.0005 * len(evals), (row, want)


def test_passes_are_named_by_the_function_that_made_their_forwards(ignite_run):
    """ignite's evaluator calls the model from ``evaluate_step`` (through its default
    ``model_fn``, a lambda: no name to give)."""
    _, rep, passes, _ = ignite_run
    passes = [p for p in passes if p.kind == "eval"]
    assert all(
        p.site.startswith("evaluate_step (ignite/engine/__init__.py:") for p in passes[:-1]
    ), passes
    assert passes[-1].site.startswith("<module> (ignite_eval.py:"), passes
    assert all(0.0 < p.forward_s <= p.length for p in passes), passes
    assert rep["steps"]["between_s"]["eval"]["site"].startswith("evaluate_step (")


def test_steps_are_the_trainers_iterations_none_stalled(ignite_run):
    own, rep, *_ = ignite_run
    s = rep["steps"]
    # a teacher's forward with grad off after each batch of the hand-written loop is its
    # step's own work: no pass, no step more or less
    assert s["count"] == own["iterations"] + own["hand_steps"] == 16 + 8
    assert s["step_time_s"]["max"] < 4 * SLEEP, s  # no step holds an eval's forward
    assert rep["stalls"] == []
    # the data wait is the trainer's own fetches: the evaluator's are the passes'
    steps_s = s["count"] * s["step_time_s"]["p50"]
    assert s["data_wait_fraction"] * steps_s <= 2 * own["fetch_s"] + 0.005, (s, own)


def test_between_steps_hint_speaks(ignite_run):
    """Where the evaluations are over a fifth of the run by ignite's timers (the rule
    speaks from a fifth, perftop/hints/between.py; perftop's passes hold those timers):
    about half on an idle host; less where a loaded host makes the job's start (its
    imports) slow, while the evaluations' sleeps stay as long."""
    own, rep, *_ = ignite_run
    share = sum(length for *_, length in own["evals"]) / rep["duration_s"]
    if share < 0.21:
        pytest.skip(f"the evaluations are {share:.0%} of this run: a loaded host")
    hint = next((h for h in rep["hints"] if h["id"] == "between-steps"), None)
    assert hint is not None, [h["id"] for h in rep["hints"]]
    assert "mostly evaluation" in hint["title"]
    assert any("evaluate_step (" in e for e in hint["evidence"]), hint


def test_output_unchanged(ignite_run):
    """What the job computed is the same without perftop (the evaluator's last loss)."""
    own, *_, plain = ignite_run
    assert plain["loss"] == own["loss"] and plain["checksum"] == own["checksum"]
    assert plain["iterations"] == own["iterations"]
