"""Monitor memory over a long run: RSS while a session applies steps of 8 ranks, today's
model (this tree) beside the model of the ``main`` branch, each in a fresh interpreter.

    python benchmarks/monitor_memory.py [--steps 200000] [--ranks 8] [--baseline main]

Events go through the model's real apply path (``Session.apply``, the hints evaluated every
second of event time as live), from a fast synthetic source: a ``Hello`` per rank, then steps
of ~50 ms with data/backward/optimizer phases, and a process sample per simulated second.
RSS is read from /proc at 10%, 20%, ... of the run; "growth" is from 20% (after warm-up) to
the end. ``--steps 10000000`` is the issue's 10M x 8 (about 80M events: hours on a loaded
2-core machine); the default is smaller.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FEED = r"""
import json, random, sys, time
from perftop.events import Hello, ProcSample, Step
try:  # the hints live beside the model since the layers were split; before, inside it
    from perftop.hints.session import hinted_session
except ImportError:
    from perftop.model import Session as hinted_session

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

steps, ranks = int(sys.argv[1]), int(sys.argv[2])
rnd = random.Random(1)
s = hinted_session()
pids = [1000 + r for r in range(ranks)]
t = 1_790_000_000.0
for r, pid in enumerate(pids):
    s.apply(Hello(t, pid, 1, "node1", ("train.py",), r, r, ranks, "2.13.0", "cuda:%d" % r))
marks, out, next_tick, t0 = {steps * k // 10 for k in range(1, 11)}, [], t + 1.0, time.perf_counter()
durs = [rnd.uniform(0.045, 0.055) for _ in range(4096)]
for i in range(1, steps + 1):
    d = durs[i & 4095]
    for pid in pids:
        s.apply(Step(pid, i, t, t + d, d * 0.1, d * 0.4, d * 0.2))
    t += d + 0.0005
    if t >= next_tick:
        rows = tuple((p, 1, "python", "running", 99.0, 3, 4, 2 << 30, 1 << 30, 1 << 30, 0, 0, 0)
                     for p in pids)
        s.apply(ProcSample(t, 1.0, pids[0], rows))
        next_tick = t + 1.0
    if i in marks:
        s.snapshot(window=None)  # the report's whole-run figures, as `perftop report` takes
        out.append((i, rss(), time.perf_counter() - t0))
print(json.dumps(out))
"""


def run(tree: Path, steps: int, ranks: int) -> list[tuple[int, int, float]]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PERFTOP_PURE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", FEED, str(steps), str(ranks)],
        capture_output=True, text=True, env=env, cwd=tree,
    )  # fmt: skip
    if out.returncode != 0:
        sys.exit(f"feed failed in {tree}:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200_000, help="steps per rank")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--baseline", default="main", help="git ref to compare with ('' for none)")
    args = ap.parse_args()
    columns = {"this tree": run(ROOT, args.steps, args.ranks)}
    if args.baseline:
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "perftop"],
                capture_output=True, check=True,
            ).stdout  # fmt: skip
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            columns[args.baseline] = run(Path(tmp), args.steps, args.ranks)
    events = args.steps * args.ranks
    print(f"{args.steps:,} steps x {args.ranks} ranks = {events:,} step events (+1 Hz samples)")
    print(f"{'at step':>10s}" + "".join(f"{name:>18s}" for name in columns))
    for k in range(len(columns["this tree"])):
        step = columns["this tree"][k][0]
        print(f"{step:>10,d}" + "".join(f"{c[k][1] / 2**20:15.1f} MB" for c in columns.values()))
    for name, c in columns.items():
        growth = c[-1][1] - c[1][1]
        per = growth / max(1, (c[-1][0] - c[1][0]) * args.ranks)
        rate = c[-1][0] * args.ranks / c[-1][2]
        print(
            f"{name:>10s}: RSS {c[1][1] / 2**20:.1f} MB after warm-up (20%), "
            f"{c[-1][1] / 2**20:.1f} MB at the end: {growth / 2**20:+.1f} MB "
            f"({per:.1f} bytes per step event); {rate:,.0f} step events/s applied"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
