"""Workers that start again each epoch (no ``persistent_workers``) and workers started with
``spawn``: the input-bound hint names the restarts' wait, measured on the steps after each
start, and advises persistent workers; the worker-memory hint tells a spawned worker's own
interpreter from copy-on-write growth."""

from __future__ import annotations

import sys
from dataclasses import replace

from perftop.hints import evaluate
from perftop.model.snapshot import ProcessRole, ProcRow, Snapshot
from tests.helpers import WORKLOADS, perftop, run_and_report
from tests.test_hints_rules_more import PID, snap

EPOCH = 20  # steps an epoch
RESTART_S = 1.5  # a spawned worker's start: it imports torch


def epochs(persistent: bool = False, method: str = "spawn", spread: bool = False) -> Snapshot:
    """Three epochs of 20 short steps; the first step of each later epoch waits for the
    workers' start (or, ``spread``, the same wait spread over every step)."""
    n = 3 * EPOCH
    waits = [0.001] * n
    for k in (EPOCH, 2 * EPOCH):
        waits[k] = RESTART_S
    if spread:
        waits = [sum(waits) / n] * n
    s = snap(waits, compute=0.002, busy=0.08, batch_s=0.0003)
    rows = s.steps.recent
    starts = (rows[0].t0 - 2.0, rows[EPOCH].t0 + 1e-4, rows[2 * EPOCH].t0 + 1e-4)
    ld = replace(s.loaders[0], persistent_workers=persistent, start_method=method, starts=starts)
    return replace(s, loaders=(ld,))


def hint(s: Snapshot, hint_id: str = "input-bound"):
    found, errors = evaluate(s)
    assert not errors
    return found.get(hint_id)


def test_restarts_each_epoch_are_named_with_their_wait_and_persistent_workers_advised():
    h = hint(epochs())
    assert h is not None
    ev = " ".join(h.evidence)
    assert "start again with each epoch (persistent_workers=False, spawn)" in ev, ev
    assert "each of 2 starts waited 1.50s on average" in ev, ev
    assert h.advice[0].startswith("DataLoader(..., persistent_workers=True)"), h.advice
    # idle workers between epochs: not batches slow to move
    assert not any("slow to reach the loop" in a for a in h.advice), h.advice
    assert "persistent_workers=True" in h.est_gain_text
    assert 0.9 < (h.est_gain or 0) <= 1.0


def test_no_restart_story_where_it_does_not_hold():
    for s in (epochs(persistent=True), epochs(spread=True)):
        h = hint(s)
        assert h is not None  # still input-bound
        assert "start again" not in " ".join(h.evidence)
        assert not any("persistent_workers=True" in a for a in h.advice), h.advice
    # a start before the steps looked at (the first epoch's) is not counted
    s = epochs()
    ld = replace(s.loaders[0], starts=s.loaders[0].starts[:1])
    assert "start again" not in " ".join(hint(replace(s, loaders=(ld,))).evidence)


def test_an_evaluation_loader_started_between_epochs_counts_each_step_once():
    """Each epoch starts an evaluation loader's workers, then the training loader's: both
    before the same step, which is counted once, whichever loader started last."""
    s = epochs()
    train = s.loaders[0]
    ev = replace(train, loader_id=1, starts=tuple(t - 1e-5 for t in train.starts),
                 t=train.t + 1.0)  # fmt: skip
    h = hint(replace(s, loaders=(train, ev)))
    assert h is not None and "each of 2 starts" in " ".join(h.evidence), h.evidence
    assert h.advice[0].startswith("DataLoader(..., persistent_workers=True)")


def workers_holding(mib: int, first_mib: int, method: str) -> Snapshot:
    procs = tuple(
        ProcRow(
            PID + 1 + i,
            PID,
            uss_bytes=mib * 2**20,
            uss_bytes_first=first_mib * 2**20,
            rss_bytes=(mib + 20) * 2**20,
        )  # fmt: skip
        for i in range(2)
    )
    roles = tuple(ProcessRole(PID + 1 + i, "worker", worker_id=i) for i in range(2))
    s = replace(snap(0.0, procs=procs), roles=roles)
    return replace(s, loaders=(replace(s.loaders[0], start_method=method),))


def test_a_spawned_workers_own_interpreter_is_no_copy_on_write():
    # forked workers that grew 76 MiB to 148 MiB: the copy-on-write story
    h = hint(workers_holding(148, 72, "fork"), "worker-memory")
    assert h is not None and "copy-on-write" in " ".join(h.evidence)
    # spawned ones start with nothing shared: their imports are no growth to advise on
    assert hint(workers_holding(148, 72, "spawn"), "worker-memory") is None
    assert hint(workers_holding(148, 72, "forkserver"), "worker-memory") is None
    # large is large, said without the copy-on-write story and its advice
    h = hint(workers_holding(600, 150, "spawn"), "worker-memory")
    assert h is not None
    text = " ".join(h.evidence + h.advice)
    assert "started with spawn" in text and "copy-on-write" not in text
    assert "gc.freeze" not in text and h.advice[0].startswith("Use fewer workers"), h.advice


def test_spawned_workers_restarting_each_epoch_on_a_real_run(tmp_path):
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "spawn_epochs.py"))
    assert proc.returncode == 0 and "steps 60" in proc.stdout, proc.stderr
    (ld,) = rep["loaders"]
    assert ld["start_method"] == "spawn" and ld["starts"] == 3, ld
    h = next(h for h in rep["hints"] if h["id"] == "input-bound")
    assert any("start again with each epoch" in e for e in h["evidence"]), h
    assert h["advice"][0].startswith("DataLoader(..., persistent_workers=True)"), h
    # ~150 MiB each of their own torch: no copy-on-write to advise on
    assert "worker-memory" not in {h["id"] for h in rep["hints"]}, rep["hints"]
    # The text report's Processes table: the worker started anew each epoch is one row
    # (its three processes' figures together), the JSON has each process.
    workers = [p for p in rep["processes"] if p["role"] == "worker"]
    assert len(workers) == 3 and len({p["pid"] for p in workers}) == 3, workers
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path)
    table = text.stdout.split("\nProcesses\n", 1)[1].split("\n\n", 1)[0].splitlines()
    rows = [r for r in table[1:] if "worker" in r.split()[:3]]
    assert len(rows) == 1 and rows[0].split()[:3] == ["3", "pids", "worker"], table
    avgs = [p["cpu_percent_avg"] for p in workers if p["cpu_percent_avg"] is not None]
    lo, hi = min(avgs), max(avgs)
    avg = f"{hi:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}%"
    assert f" {avg} " in rows[0], (rows, lo, hi)
    assert any(r.startswith("  N pids: a worker started anew each epoch") for r in table)
    # (a loaded host may catch a restart's wait as a stall, whose stacks name a worker's pid)
    assert all(str(p["pid"]) not in "\n".join(table) for p in workers), table
