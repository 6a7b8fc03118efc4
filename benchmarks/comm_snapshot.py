"""What a distributed job's collectives cost the monitor's model: a snapshot of a 2-rank
DDP job (the live view's, twice a second, and the whole run's, for the report and the
hints' verdict), with each collective's arrivals kept from one snapshot to the next (what
the model does) beside the same snapshot with them made again (what it did before),
interleaved, on one recording.

    python benchmarks/comm_snapshot.py [--recording R] [--steps 2500] [--rounds 40]

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recording")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args(argv)
    from perftop.model import Session
    from perftop.model.comm import CommReducer
    from perftop.model.steps import LIVE_WINDOW
    from perftop.recording import read_events

    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(args.recording) if args.recording else Path(tmp) / "ddp.perftop"
        if not args.recording:
            record(args.steps, rec)
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
