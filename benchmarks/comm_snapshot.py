"""What a distributed job's collectives cost the monitor's model: a snapshot of a 2-rank
DDP job (the live view's, twice a second, and the whole run's, for the report and the
hints' verdict), with each collective's arrivals kept from one snapshot to the next (what
the model does) beside the same snapshot with them made again (what it did before),
interleaved, on one recording. ``--compare TREE`` times the same snapshots with the model
of another checkout (``git worktree add /tmp/base REV``), each tree in its own process,
interleaved (this, base, base, this, ...), and prints their ratio.

    python benchmarks/comm_snapshot.py [--recording R] [--steps 2500] [--rounds 40]
        [--compare TREE --runs 6]

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
import time
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
s = Session()
s.apply_all(read_events(Path(sys.argv[2])))
for window in (LIVE_WINDOW, None):
    s._snapshot(None, window)
    xs = []
    for _ in range(int(sys.argv[3])):
        t = time.perf_counter()
        s._snapshot(None, window)
        xs.append(time.perf_counter() - t)
    print(statistics.median(xs))
"""


def compare(tree: str, rec: Path, runs: int, rounds: int) -> None:
    """Each tree's live and whole-run snapshot (median of ``rounds``), one process a run."""
    got: dict[str, list[list[float]]] = {"this": [], "base": []}
    order = ["this", "base"]
    for i in range(runs):
        for arm in order if i % 2 == 0 else order[::-1]:
            root = str(ROOT) if arm == "this" else tree
            out = subprocess.run([sys.executable, "-c", TIMED, root, str(rec), str(rounds)],
                                 capture_output=True, text=True, check=True, cwd="/")  # fmt: skip
            got[arm].append([float(x) for x in out.stdout.split()])
    for j, name in enumerate(("live view", "whole run")):
        this = statistics.median(r[j] for r in got["this"])
        base = statistics.median(r[j] for r in got["base"])
        lo, hi = (f(r[j] for r in got["this"]) for f in (min, max))
        blo, bhi = (f(r[j] for r in got["base"]) for f in (min, max))
        print(f"{name}: base {base * 1e3:.2f} ms ({blo * 1e3:.2f}-{bhi * 1e3:.2f}), "
              f"this {this * 1e3:.2f} ms ({lo * 1e3:.2f}-{hi * 1e3:.2f}): "
              f"{this / base:.2f}x over {runs} runs each")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recording")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--compare", metavar="TREE", help="another checkout's model beside this one")
    ap.add_argument("--runs", type=int, default=6, help="processes per tree with --compare")
    args = ap.parse_args(argv)
    from perftop.model import Session
    from perftop.model.comm import CommReducer
    from perftop.model.steps import LIVE_WINDOW
    from perftop.recording import read_events

    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(args.recording) if args.recording else Path(tmp) / "ddp.perftop"
        if not args.recording:
            record(args.steps, rec)
        if args.compare:
            compare(args.compare, rec, args.runs, args.rounds)
            return 0
        s = Session()
        s.apply_all(read_events(rec))
    comm = next(r for r in s.reducers if isinstance(r, CommReducer))
    matched = len(comm._matched(None))
    print(f"{matched:,} collectives every rank entered, {len(comm.kinds)} ranks")
    for name, window in (("live view", LIVE_WINDOW), ("whole run", None)):
        made, kept = [], []
        for _ in range(args.rounds):
            comm._seen.clear()
            t = time.perf_counter()
            a = s._snapshot(None, window).comm
            made.append(time.perf_counter() - t)
            t = time.perf_counter()
            b = s._snapshot(None, window).comm
            kept.append(time.perf_counter() - t)
            assert a == b
        m, k = statistics.median(made), statistics.median(kept)
        print(f"{name}: arrivals made again {m * 1e3:.2f} ms, kept {k * 1e3:.2f} ms: {k / m:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
