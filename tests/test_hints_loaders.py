"""Input-bound with two loaders: the hint is about the loader the training loop takes its
batches from, not the evaluation loader that started last (persistent workers: it stays
the latest started for the rest of the run, its workers idle)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.helpers import WORKLOADS, run_and_report


def test_input_bound_names_the_training_loaders_workers(tmp_path: Path) -> None:
    proc, report = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "two_loaders.py"), "3")
    assert proc.returncode == 0 and "trained 120" in proc.stdout, proc.stderr
    grads = sorted((ld["loader_id"], ld["grad_enabled"]) for ld in report["loaders"])
    assert grads == [(0, True), (1, False)], report["loaders"]
    (hint,) = [h for h in report["hints"] if h["id"] == "input-bound"]
    evidence = " ".join(hint["evidence"])
    # the training loader's workers: ~40 ms a batch, busy nearly all the time
    per_batch = re.search(r"\(([\d.]+)ms per batch each, busy (\d+)%", evidence)
    assert per_batch is not None, evidence
    assert float(per_batch[1]) > 20 and int(per_batch[2]) >= 60, evidence
    # not the idle evaluation workers' advice (on a busy host the CPU may be the limit)
    assert not any("slow to reach the loop" in a for a in hint["advice"]), hint["advice"]
    assert "core of its own" not in evidence, evidence  # they sleep most of each batch


def test_small_batches_whose_trip_costs_more_than_their_making() -> None:
    """fastai's tabular loop on 2 busy cores: 2 workers idle 91% of the time make an 8 KiB
    batch in 0.84 ms, and the loop waits 1.9 ms for each. Smaller batches (the advice for
    large ones) would not help: each batch's trip between processes is the cost, which
    making them in the loop (num_workers=0) or fewer, larger batches cut."""
    from dataclasses import replace

    from perftop.hints import evaluate
    from tests.test_hints_rules_more import snap

    def advice(batch_bytes: int) -> tuple[str, ...]:
        s = snap(0.0019, compute=0.0024, busy=0.09, batch_s=0.00084)
        s = replace(s, workers=tuple(replace(w, batch_bytes=batch_bytes) for w in s.workers))
        hints, errors = evaluate(s, frozenset())
        assert not errors
        return hints["input-bound"].advice

    small = advice(8 * 1024)
    assert any("and small (8.0KiB): a worker makes one in 840µs, the loop waits 1.9ms" in a
               and "num_workers=0" in a for a in small), small  # fmt: skip
    large = advice(12 * 2**20)
    assert any("Send smaller batches" in a for a in large), large


@pytest.mark.parametrize("grad_on", [False, True])
def test_a_training_loader_evaluated_on_stays_the_training_loader(
    tmp_path: Path, grad_on: bool
) -> None:
    """After each epoch a validation loader with no workers, then the training set's loss
    (the training loader iterated under ``no_grad``, its workers started anew); or the
    training set's first, then the validation with grad on (the model in eval mode, no
    ``no_grad``). Each epoch's evaluations are one pass between steps (the validation with
    grad on right after the pass under ``no_grad`` had ended it, and sat in the next step,
    its loader a training one). The training loader stays the one the hint judges, not
    the validation loader started after it (with grad on, the latest started of those
    iterated with grad on: its first iterator started in an evaluation)."""
    args = ["grad_on"] if grad_on else []
    proc, report = run_and_report(tmp_path, sys.executable,
                                  str(WORKLOADS / "train_set_eval.py"), *args)  # fmt: skip
    assert proc.returncode == 0 and "trained 60" in proc.stdout, proc.stderr
    loaders = sorted((ld["loader_id"], ld["num_workers"], ld["grad_enabled"], ld["during"])
                     for ld in report["loaders"])  # fmt: skip
    assert loaders == [(0, 2, True, None), (1, 0, grad_on, "eval")], report["loaders"]
    assert report["steps"]["count"] == 60
    assert report["steps"]["between_s"]["eval"]["count"] == 3, report["steps"]["between_s"]
    (hint,) = [h for h in report["hints"] if h["id"] == "input-bound"]
    evidence = " ".join(hint["evidence"])
    assert "2 workers make" in evidence and "num_workers=0" not in evidence, evidence
