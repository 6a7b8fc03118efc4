"""A real PyG program (``examples/mutag_gin.py``'s shape): steps, evaluation passes and
their syncs against the program's own counters. Its test reads each batch's correct count
with ``int()`` (and PyG's pooling reads a batch's graph count the same way): on a GPU,
two syncs per evaluation batch, which perftop must show per pass although the job
evaluates only once an epoch."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from perftop.events import SyncBatch
from perftop.recording import read_events
from tests.helpers import WORKLOADS, needs, run_and_report
from tests.plainrun import start_plain

needs("torch_geometric")

JOB = WORKLOADS / "pyg_gin.py"
EPOCHS = 6


def _line(marker: str) -> int:
    lines = JOB.read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if marker in ln)


def test_a_graph_networks_evaluation_syncs_are_counted_per_pass(
    tmp_path: Path, monkeypatch
) -> None:
    # A fixed draw; passes are watched on their own draw too, so every seed shows the
    # evaluations' syncs. (A watched pass runs 2-3 times as long: the job's evaluations are
    # small, 4 batches, so that it fits the watches' budget even on a loaded host; of 8
    # batches, the first pass, the only one watched, outran it under one spinning process.)
    monkeypatch.setenv("PERFTOP_SYNC_SEED", "1")
    job = [sys.executable, str(JOB), str(EPOCHS)]
    plain = start_plain(job, cwd=tmp_path)
    proc, rep = run_and_report(tmp_path, *job)  # beside it: both at once
    out, _ = plain.communicate(timeout=120)
    assert plain.returncode == proc.returncode == 0, proc.stderr[-2000:]
    # the output is the job's own (the counters' line holds its own timer)
    assert proc.stdout.splitlines()[:-1] == out.splitlines()[:-1]
    own = json.loads(proc.stdout.splitlines()[-1])
    assert rep["steps"]["count"] == own["steps"] == EPOCHS * 3
    evals = rep["steps"]["between_s"]["eval"]
    assert evals["count"] == own["tests"] == EPOCHS
    assert abs(evals["total_s"] - own["test_s"]) <= 0.1 * own["test_s"] + 0.0005 * EPOCHS
    per_pass = own["test_batches"] / own["tests"]
    between = {(e["file"], e["line"], e["op"]): e for e in rep["sync_between"]}
    test_site = between[(str(JOB), _line("TEST_LINE"), "int")]
    alone = [e for e in read_events(tmp_path / "r.perftop") if isinstance(e, SyncBatch)
             and not e.sampled and e.between]  # fmt: skip
    assert alone, "no pass watched on its own draw"
    assert test_site["passes"] >= 1 and test_site["per_pass"] == per_pass, test_site
    # PyG's own int() in global_add_pool (its batch's graph count), reached from forward
    [pool] = [e for e in rep["sync_between"] if e["lib_file"]]
    assert pool["lib_file"].endswith("torch_geometric/utils/_scatter.py"), pool
    assert pool["per_pass"] == per_pass and pool["function"] == "forward", pool
    # the training loop's own per step: the loss read and the pooling's read
    steps = {(e["file"].rsplit(os.sep, 1)[-1], e["line"]) for e in rep["sync_events"]}
    assert ("pyg_gin.py", _line("LOSS_LINE")) in steps, rep["sync_events"]
    assert not [n for n in rep["notes"] if "internal" in str(n)], rep["notes"]
