"""What a short run pays: the hook's cost by step index, over a run's first 100 steps, its
first 2,000 and its steady state, against the plain job, in one run.

``e2e_overhead.py`` measures the steady state after a warm-up; a short job, and the first
seconds of every job, also pay for the hook's start (its tracker learning the loop's
shape, the first steps the sync detector watches, the sender's connect) and nothing
hides them. Here the same tight CPU step as there (DataLoader batch, two Linear layers,
backward, SGD step, one torch thread) runs from its first batch, with no warm-up; the
job reads its clock and its process CPU time (all threads: the hook's sender too) after
steps 1, 100, 2,000 and the last; CPU time is what a busy machine inflates least. Step 1 (0) is left out of
every window: its one-time costs (torch's lazy init) are the plain job's too, and swing
with the machine.

Arms: plain and ``perftop run --headless --no-record``, interleaved (A B, then B A, ...);
per window, the median over rounds of (perftop's run - that round's plain run), µs per
step, with its 95% confidence interval (e2e_overhead.median_ci), and the ratio to the
plain job's median. Pairing each run with its own round's plain run cancels a shared
machine's slow drifts.

``--with NAME:VAR=VALUE[,VAR=VALUE]`` adds ``perftop run`` with those settings in its
environment as another arm (``early1:PERFTOP_SYNC_EARLY=1``, ``sync-off:PERFTOP_SYNC=off``:
what the sync detector's first watched steps cost).

    python benchmarks/start_cost.py [--runs 21] [--steps 20000] [--with NAME:VAR=VALUE,...]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess

from e2e_overhead import interleaved, median_ci, with_option

MARKS = (1, 100, 2000)  # the clock is read after these steps, and after the last

JOB = """
import sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0); torch.set_num_threads(1)
steps = int(sys.argv[1])
marks = {int(m) for m in sys.argv[2].split(",")} | {steps}
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(steps * 16, 64), torch.randn(steps * 16, 8))
at = {}
for i, (x, y) in enumerate(DataLoader(data, batch_size=16), 1):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    if i in marks:
        at[i] = (time.perf_counter(), time.process_time())
    if i == steps:
        break
print("RESULT", *(f"{k}:{at[k][0]!r}:{at[k][1]!r}" for k in sorted(at)))
"""


def windows(steps: int) -> list[tuple[str, int, int]]:
    """(name, first step, last step): each window starts after step 1."""
    return [
        ("steps 2-100", 1, 100),
        ("steps 2-2000", 1, 2000),
        (f"steps 2001-{steps}", 2000, steps),
    ]


Marks = dict[int, tuple[float, float]]  # step -> (wall clock, process CPU) after it


def _run(cmd: list[str], env: dict[str, str], cwd: str) -> Marks:
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            fields = (p.split(":") for p in line.split()[1:])
            return {int(k): (float(w), float(c)) for k, w, c in fields}
    raise RuntimeError(f"{cmd[:4]} failed: {out.stderr[-500:]}")


def per_step(at: Marks, a: int, b: int, f: int) -> float:
    return (at[b][f] - at[a][f]) / (b - a)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=21)
    p.add_argument("--steps", type=int, default=20000)
    with_option(p, "an arm of perftop run with these environment settings")
    a = p.parse_args()
    if a.steps <= MARKS[-1]:
        p.error(f"--steps must be over {MARKS[-1]}")
    marks = ",".join(map(str, MARKS))
    res = interleaved(JOB, [str(a.steps), marks], a.runs, a.settings, _run)
    print(
        f"`perftop run --headless` (and each --with arm) vs plain, {a.runs} interleaved rounds, {a.steps} steps "
        "from the first batch (no warm-up); per window, the median over rounds of "
        "(perftop - that round's plain run) and its 95% confidence interval"
    )
    for name, lo_i, hi_i in windows(a.steps):
        for f, what in ((0, "wall"), (1, "CPU ")):
            base = statistics.median(per_step(r, lo_i, hi_i, f) for r in res["plain"]) * 1e6
            print(f"  {name:<16} {what}: plain {base:7.1f} µs/step")
            for arm, got in res.items():
                if arm == "plain":
                    continue
                d = sorted(
                    (per_step(x, lo_i, hi_i, f) - per_step(y, lo_i, hi_i, f)) * 1e6
                    for x, y in zip(got, res["plain"], strict=True)
                )
                mid, (lo, hi) = statistics.median(d), median_ci(d)
                print(
                    f"    {arm:<10} {mid:+7.2f} µs/step [{lo:+7.2f} .. {hi:+7.2f}], "
                    f"ratio {(base + mid) / base:.4f}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
