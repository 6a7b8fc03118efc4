"""Keras 3 on the torch backend, a real ``fit`` with validation data, checked against its
own callback's counts: a step per training batch (found by its backward() calls: Keras
updates with its own optimizer), each evaluation one pass between steps named by Keras's
``test_step``, each save of its ``ModelCheckpoint`` a checkpoint, no optimizer phase said
to take 0 s, and its DataLoaders, made anew for
each epoch's training and each evaluation, told apart by when they started."""

from __future__ import annotations

import json
import sys

from perftop.events import Between
from perftop.recording import read_events
from tests.helpers import WORKLOADS, perftop, run_and_report


def test_keras_fit_steps_evaluations_and_loaders(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))  # its config, not the user's
    proc, r = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "keras_fit.py"))
    assert proc.returncode == 0, proc.stderr
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    s = r["steps"]
    assert s["count"] == own["train_batches"] == 4 * 32
    ev = s["between_s"]["eval"]
    assert ev["count"] == own["evals"] == 4, s["between_s"]
    assert ev["site"].startswith("test_step (keras/src/backend/torch/trainer.py:"), ev
    assert "optimizer" not in s["phases_s"] and s["phases_s"]["backward"] > 0, s
    # its ModelCheckpoint's save after each validation (a .keras zip, no torch.save): a
    # checkpoint each, inside the job's timer of the callback's save (which read as part
    # of the validation before)
    got = [e for e in read_events(tmp_path / "r.perftop") if isinstance(e, Between)]
    saves = [e.length for e in got if e.kind == "checkpoint"]
    assert len(saves) == len(own["save_s"]) == 4, got
    for mine, want in zip(saves, own["save_s"], strict=True):
        assert 0.8 * want - 0.002 <= mine <= want, (saves, own["save_s"])
    # fit peeks one batch to build the model (a loader of its own), then each epoch makes a
    # training loader and an evaluation's: the evaluations' four are one run, started in
    # the evaluations; the training ones of epochs 2 to 4 (started in the steps) another
    lds = sorted(r["loaders"], key=lambda ld: ld["loader_id"])
    evals = [ld for ld in lds if ld["during"] == "eval"]
    trains = [ld for ld in lds if ld["during"] is None]
    assert len(evals) == 4 and {ld["remade_from"] for ld in evals} == {evals[0]["loader_id"]}
    runs = [ld["remade_from"] for ld in trains]
    assert runs[-3:] == [trains[-3]["loader_id"]] * 3 and None in runs[:-3], lds
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    assert "no torch.optim step" in text and "made at each evaluation or one made at" in text
