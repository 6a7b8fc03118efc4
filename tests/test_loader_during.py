"""Which DataLoaders are an evaluation's, by when they started: a loader whose first
iterator started in an interval outside the steps (an evaluation pass) is of that kind
(``during``), whatever its settings and autograd say, so a loop that makes its training
loader and its evaluation loader anew each epoch (Keras's fit) has two runs of loaders made
anew, not one that mixes them."""

from __future__ import annotations

import json
import sys

from perftop.events import Between, LoaderInfo, Step
from perftop.model import Session
from tests.helpers import WORKLOADS, perftop, run_and_report


def test_a_loop_making_both_loaders_each_epoch_has_a_run_of_each(tmp_path):
    proc, r = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "epoch_loaders.py"), "4")
    assert proc.returncode == 0, proc.stderr
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["steps"]["count"] == own["steps"] == 40
    assert r["steps"]["between_s"]["eval"]["count"] == own["evals"] == 4
    lds = sorted(r["loaders"], key=lambda ld: ld["loader_id"])
    # made in turn: train, val, train, val...; every one with autograd on at its first batch
    assert [ld["grad_enabled"] for ld in lds] == [True] * 8, lds
    assert [ld["during"] for ld in lds] == [None, "eval"] * 4, lds
    # the training loaders made after the first step (epochs 2 to 4) are one run, the four
    # evaluations' another; the first training loader is in none
    assert [ld["remade_from"] for ld in lds] == [None, 1, 2, 1, 2, 1, 2, 1], lds
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    block = text.split("DataLoaders\n", 1)[1].split("\n\n", 1)[0]
    rows = block.splitlines()[1 : 3 + 1]
    assert [row.split()[1:3] for row in rows] == [["L0", "TensorDataset"], ["L1–L7", "×4"],
                                                  ["L2–L6", "×3"]], block  # fmt: skip
    assert "(an evaluation's, made at each evaluation or one made at each epoch)" in block


def _loader(pid: int, i: int, t: float) -> LoaderInfo:
    return LoaderInfo(t, pid, i, 0, 16, False, None, False, (), "D", "", True)


def test_a_loader_is_placed_by_its_first_start_whichever_event_comes_first():
    """An interval's end comes once the steps go on, after the loaders it started (the
    usual order), after an interval inside it (the HF Trainer's checkpoint at the end of an
    evaluation), or, from a reader of merged streams, before one: either way a loader
    that started in it is of its kind; one that started before it, or after its end, is
    not; a later start of a loader made before (a persistent loader's next epoch) changes
    nothing."""
    s = Session()
    s.apply(Step(1, 0, 10.0, 11.0))
    s.apply(_loader(1, 0, 10.5))  # in the first step
    s.apply(_loader(1, 1, 11.2))  # in the evaluation from 11.0 to 12.0
    s.apply(Between(1, "eval", 11.0, 1.0))
    s.apply(_loader(1, 2, 12.5))  # after it: in the steps
    s.apply(_loader(1, 3, 13.5))  # comes after the interval it started in
    s.apply(_loader(1, 0, 13.6))  # L0's next epoch, in that interval too
    s.apply(Between(1, "checkpoint", 13.0, 1.0))
    s.apply(_loader(2, 0, 11.5))  # another process's: no interval of its own
    s.apply(Between(1, "eval", 15.0, 1.0))
    s.apply(_loader(1, 4, 15.5))  # its interval's end came first
    s.apply(_loader(1, 5, 17.1))  # an evaluation from 17.0 that saves a checkpoint at its
    s.apply(Between(1, "checkpoint", 17.5, 0.2))  # end: the checkpoint's end comes first
    s.apply(Between(1, "eval", 17.0, 1.0))
    got = {(ld.pid, ld.loader_id): ld.during for ld in s.snapshot(window=None).loaders}
    want = {(1, 0): "", (1, 1): "eval", (1, 2): "", (1, 3): "checkpoint", (1, 4): "eval"}
    want[(1, 5)] = "eval"
    assert got == {**want, (2, 0): ""}, got
