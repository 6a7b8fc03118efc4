"""Input-bound with two loaders: the hint is about the loader the training loop takes its
batches from, not the evaluation loader that started last (persistent workers: it stays
the latest started for the rest of the run, its workers idle)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

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
