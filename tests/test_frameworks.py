"""Real frameworks under ``perftop run``: the HF Trainer (a tiny GPT-2 from a config,
nothing downloaded) and Lightning (a closure on every optimizer step)."""

from __future__ import annotations

import sys

from perftop.events import Step
from perftop.recording import read_events
from tests.helpers import WORKLOADS, run_and_report


def _run(tmp_path, script: str) -> dict:
    proc, r = run_and_report(tmp_path, sys.executable, str(WORKLOADS / script), str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    n = int(proc.stdout.split("steps")[-1])
    assert r["steps"]["count"] == n, (n, r["steps"])
    for st in read_events(str(tmp_path / "r.perftop")):  # no phase longer than its step
        if isinstance(st, Step):
            assert st.data + st.backward + st.optimizer <= st.duration + 1e-6
    return r


def test_hf_trainer_gradient_accumulation_and_evaluation(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = _run(tmp_path, "hf_trainer.py")
    s = r["steps"]
    assert s["count"] == 6  # optimizer steps, not the 24 micro-batches
    # Two evaluations (steps 3 and 6) and the checkpoint's torch.save calls, between steps.
    assert s["between_s"]["eval"]["count"] == 2
    assert s["between_s"]["checkpoint"]["count"] == 1
    assert s["phases_s"]["backward"] > 0 and s["phases_s"]["forward/other"] > 0
    # An evaluation pass takes several steps' time: none of it sits in a step.
    assert s["step_time_s"]["max"] < 3 * s["step_time_s"]["p50"] + 0.5


def test_lightning_closure_phases_and_validation(tmp_path):
    r = _run(tmp_path, "lightning_fit.py")
    s = r["steps"]
    ph = s["phases_s"]
    assert s["count"] == 12
    # The closure's forward and backward are the step's; the optimizer phase is the update.
    assert ph["forward/other"] > 0 and ph["backward"] > 0
    assert ph["optimizer"] < s["step_time_s"]["p50"] / 2
    # The sanity check and three validations (every 4 batches) are between steps; the
    # validations (after a step) are named by validation_step, the sanity check by nothing.
    ev = s["between_s"]["eval"]
    assert set(s["between_s"]) == {"eval"} and ev["count"] == 4, s["between_s"]
    assert ev["site"] == "validation_step (lightning_fit.py:28)", ev
    assert 0 < ev["site_s"] < ev["total_s"]
