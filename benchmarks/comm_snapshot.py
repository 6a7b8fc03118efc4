"""What a distributed job's collectives cost the monitor's model, on one recording of a
2-rank DDP job: the live snapshot as the monitor takes it (the recording read in order,
after its first half a live snapshot each third of a second of its clock: the TUI's two a
second and the hints' one, with the events between them folded in), the same snapshot
taken again with nothing new, and the whole run's (the report's, the hints' verdict).
Each figure is a median. ``--compare TREE`` runs the same with the model of another
checkout (``git worktree add /tmp/base REV``), each tree in its own process, interleaved
(this, base, base, this, ...), and prints their ratio.

    python benchmarks/comm_snapshot.py [--recording R] [--steps 2500] [--rounds 40]
        [--compare TREE] [--runs 6]

Without ``--recording``, one is made first: ``tests/workloads/ddp_comm.py`` under
``perftop run --headless`` and torchrun, rank 1 20 ms late into each backward (3
collectives a step: ~2,000 matched ones in the live view's window).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def record(steps: int, out: Path) -> None:
    env = {**os.environ, "MODE": "slow", "STEPS": str(steps), "DELAY": "0.02"}
    cmd = [sys.executable, "-m", "perftop", "run", "--headless", "--force", "--record", str(out),
           "--", sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node=2", str(ROOT / "tests" / "workloads" / "ddp_comm.py")]  # fmt: skip
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.run(cmd, env=env, check=True, cwd=out.parent, **quiet)


TIMED = """
import sys, time, statistics
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from perftop.model import Session
from perftop.model.steps import LIVE_WINDOW
from perftop.recording import read_events
events = list(read_events(Path(sys.argv[2])))
s = Session()
s.apply_all(events[: len(events) // 2])
live, due = [], s.last_t or 0.0
for ev in events[len(events) // 2 :]:
    s.apply(ev)
    if s.last_t is not None and s.last_t >= due:
        due = s.last_t + 1 / 3
        t = time.perf_counter()
        s._snapshot(None, LIVE_WINDOW)
        live.append(time.perf_counter() - t)
print(statistics.median(live))
for window in (LIVE_WINDOW, None):
    s._snapshot(None, window)
    xs = []
    for _ in range(int(sys.argv[3])):
        t = time.perf_counter()
        s._snapshot(None, window)
        xs.append(time.perf_counter() - t)
    print(statistics.median(xs))
print(len(live))
"""
FIGURES = ("live view, as taken", "live view, again", "whole run")


def timed(root: str, rec: Path, rounds: int) -> list[float]:
    out = subprocess.run([sys.executable, "-c", TIMED, root, str(rec), str(rounds)],
                         capture_output=True, text=True, check=True, cwd="/")  # fmt: skip
    return [float(x) for x in out.stdout.split()]


def compare(tree: str, rec: Path, runs: int, rounds: int) -> None:
    """Each tree's figures, one process a run, interleaved."""
    got: dict[str, list[list[float]]] = {"this": [], "base": []}
    order = ["this", "base"]
    for i in range(runs):
        for arm in order if i % 2 == 0 else order[::-1]:
            got[arm].append(timed(str(ROOT) if arm == "this" else tree, rec, rounds))
    print(f"{int(got['this'][0][-1])} live snapshots as taken a run")
    for j, name in enumerate(FIGURES):
        this = [r[j] * 1e3 for r in got["this"]]
        base = [r[j] * 1e3 for r in got["base"]]
        m, b = statistics.median(this), statistics.median(base)
        print(f"{name}: base {b:.2f} ms ({min(base):.2f}-{max(base):.2f}), "
              f"this {m:.2f} ms ({min(this):.2f}-{max(this):.2f}): "
              f"{m / b:.2f}x over {runs} runs each")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recording")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--compare", metavar="TREE", help="another checkout's model beside this one")
    ap.add_argument("--runs", type=int, default=6, help="processes per tree with --compare")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(args.recording) if args.recording else Path(tmp) / "ddp.perftop"
        if not args.recording:
            record(args.steps, rec)
        if args.compare:
            compare(args.compare, rec, args.runs, args.rounds)
            return 0
        got = timed(str(ROOT), rec, args.rounds)
    print(f"{int(got[-1])} live snapshots as taken")
    for name, x in zip(FIGURES, got, strict=False):
        print(f"{name}: {x * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
