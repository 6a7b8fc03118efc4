"""The HF Trainer's checkpoints, each as long as the Trainer's own ``_save_checkpoint``
(the job's timer around it): its files' writes and all that comes between, before and
after them (the weights' state dict and conversion before the safetensors file, the
config files, the state's JSON and the old checkpoints' rotation after the last
``torch.save``). The saves' span alone was 5 of each 8 ms, 13 of the first 65, and the
next step held the rest."""

from __future__ import annotations

import json
import sys

from perftop.events import Between
from perftop.recording import read_events
from tests.helpers import WORKLOADS, run_and_report


def _each_save_is_its_whole_call(tmp_path, workload: str, timed: str) -> None:
    """``workload`` under perftop: 20 steps and 4 checkpoints, each as long as the job's own
    timer of the call (``own[timed]``): the job's timer is around the call, ours inside it."""
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / workload),
                               str(tmp_path / "out"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rep["steps"]["count"] == own["steps"] == 20
    got = [e for e in read_events(tmp_path / "r.perftop") if isinstance(e, Between)]
    assert [e.kind for e in got] == ["checkpoint"] * 4, got
    for e, want in zip(got, own[timed], strict=True):
        assert want - 0.002 <= e.length <= want, (got, own)


def test_each_checkpoint_is_the_trainers_whole_save(tmp_path) -> None:
    _each_save_is_its_whole_call(tmp_path, "hf_checkpoints.py", "checkpoint_s")


def test_each_save_pretrained_is_its_whole_call(tmp_path) -> None:
    """A model's ``save_pretrained`` in a loop of the job's own (accelerate's ``no_trainer``
    examples): one checkpoint each, as long as the job's timer of the call. Its state
    dict's conversion before the safetensors file and the config files after it were the
    next step's."""
    _each_save_is_its_whole_call(tmp_path, "hf_save_pretrained.py", "save_s")
