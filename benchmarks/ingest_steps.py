"""What the monitor pays per step of a fast loop: the hub's work on a stream of packed
steps, timed in one process per round, this tree against another side by side.

A tight loop makes thousands of steps a second (4,700 a second in a 0.2 ms CPU step); its
hook sends them packed, a frame every 0.25 s. Per frame the hub decodes it, applies it to
the hinted session, writes it to the recording (compressed at each flush), and takes a
snapshot every 0.5 s. This times exactly that path on a synthetic stream of such frames
(whole-nanosecond clocks, scheduler jitter), CPU time of the process, and prints µs per
step and the monitor's share of a core at the loop's rate.

    python benchmarks/ingest_steps.py --rounds 5 --compare /tmp/base
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RATE = 4700  # steps a second (the tight loop of docs/benchmarks.md's long run)

CHILD = r"""
import random, sys, tempfile, time
from pathlib import Path
from perftop.events import Hello, JobStart, SessionStart
from perftop.hints import hinted_session
from perftop.recording import RecordingWriter
from perftop.wire import KIND_STEPS, STEP_RECORD, Frame, decode_frame

steps, rate, pid = int(sys.argv[1]), int(sys.argv[2]), 4242
rnd = random.Random(1)
T0 = 1_790_000_000.0
frames, recs, ns, per = [], [], 0, rate // 4
for i in range(steps):
    t0 = T0 + ns / 1e9
    d = rnd.randrange(190_000, 210_000) if rnd.random() > 0.002 else 700_000
    ns += d
    recs.append(STEP_RECORD.pack(pid, i, t0, T0 + ns / 1e9, 0.0, d / 3e9, 2e-5, 3))
    ns += 3_000
    if len(recs) == per:
        frames.append(Frame(KIND_STEPS, b"".join(recs)))
        recs = []
session = hinted_session()
for ev in (SessionStart(T0, ("python", "fast.py"), "/w", "n1", 1, "0.1"),
           JobStart(T0, pid, ("python", "fast.py")),
           Hello(T0, pid, 1, "n1", ("fast.py",), 0, 0, 1, "2.13.0", "cpu")):
    session.apply(ev)
with tempfile.TemporaryDirectory() as d:
    w = RecordingWriter(Path(d) / "r.perftop", force=True)
    mono, cpu0 = 0.0, time.process_time()
    for k, f in enumerate(frames):
        events, _ = decode_frame(f, batch=True)
        w.write_frame(f)
        for ev in events:
            session.apply(ev)
        mono += 0.25
        w.tick(mono)
        if k % 2:
            session.snapshot(now=T0 + mono)
    cpu = time.process_time() - cpu0
    w.close()
print(cpu / (len(frames) * per) * 1e6)
"""


def one(tree: Path, steps: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory() as cwd:  # no stray perftop on the path but tree's
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(steps), str(RATE)],
            env=env, cwd=cwd, capture_output=True, text=True, check=True,
        )  # fmt: skip
    return float(out.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=120_000)
    ap.add_argument("--compare", type=Path, help="another tree (a `git archive` of a base)")
    a = ap.parse_args(argv)
    trees = {"this": ROOT, **({"base": a.compare} if a.compare else {})}
    got: dict[str, list[float]] = {k: [] for k in trees}
    order = list(trees)
    for r in range(a.rounds):
        for name in order if r % 2 == 0 else order[::-1]:  # interleaved, alternating first
            got[name].append(one(trees[name], a.steps))
    print(f"{a.steps} steps at {RATE}/s, frames of {RATE // 4}, {a.rounds} rounds (medians)")
    print(f"{'tree':6} {'µs/step':>8} {'% of a core at the rate':>24}  rounds")
    for name, vals in got.items():
        med = statistics.median(vals)
        rounds = " ".join(f"{v:.2f}" for v in vals)
        print(f"{name:6} {med:8.2f} {med * RATE / 1e4:23.2f}%  {rounds}")
    if a.compare:
        print(f"this / base: {statistics.median(got['this']) / statistics.median(got['base']):.2f}")
    return 0


if __name__ == "__main__":
    random.seed(0)
    sys.exit(main())
