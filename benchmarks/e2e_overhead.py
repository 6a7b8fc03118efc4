"""The whole-process cost of ``perftop run`` on a ~0.4 ms CPU training step.

A small training job (DataLoader batch, forward, backward, optimizer step) runs plainly
and under ``perftop run --headless --no-record``, interleaved, ``runs`` times each; the
job times its own loop (wall clock, after a warm-up) and its process CPU (all threads: the
hook's sender included). Best of the runs per arm, added µs per step against the plain
run; beside it the median of the runs, which says how far one process's luck (its memory
layout, the other jobs on the machine) moves a single figure. ``others`` adds arms with another checkout's perftop (e.g. a build of main), so two
versions are measured side by side in one run.

    python benchmarks/e2e_overhead.py [--runs 5] [--steps 3000] [--compare /path/to/checkout]
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

JOB = """
import os, sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0); torch.set_num_threads(1)
steps = int(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(steps * 16, 64), torch.randn(steps * 16, 8))
def epoch(n):
    for i, (x, y) in enumerate(DataLoader(data, batch_size=16)):
        if i == n:
            break
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
epoch(200)  # warm-up
t0, c0 = time.perf_counter(), time.process_time()
epoch(steps)
t1, c1 = time.perf_counter(), time.process_time()
print("RESULT", (t1 - t0) / steps, (c1 - c0) / steps)
"""


def _run(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            _, wall, cpu = line.split()
            return float(wall), float(cpu)
    raise RuntimeError(f"{cmd[:4]} failed: {out.stderr[-500:]}")


Runs = dict[str, list[tuple[float, float]]]


def measure(runs: int, steps: int, others: dict[str, Path]) -> Runs:
    """(wall, CPU) seconds per step of each run of each arm: "plain", "this", ``others``."""
    with tempfile.TemporaryDirectory() as d:
        job = Path(d) / "job.py"
        job.write_text(JOB)
        base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        base["OMP_NUM_THREADS"] = "1"
        arms: dict[str, tuple[list[str], dict[str, str]]] = {
            "plain": ([sys.executable, str(job), str(steps)], base)
        }
        for name, root in {"this": ROOT, **others}.items():
            cmd = [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--",
                   sys.executable, str(job), str(steps)]  # fmt: skip
            arms[name] = (cmd, dict(base, PYTHONPATH=str(root)))
        res: Runs = {k: [] for k in arms}
        for i in range(runs):
            order = list(arms) if i % 2 == 0 else list(arms)[::-1]
            for name in order:
                cmd, env = arms[name]
                res[name].append(_run(cmd, env, d))
    return res


def report(res: Runs, runs: int) -> list[str]:
    def stat(name: str, f: int, how: str) -> float:
        xs = [r[f] for r in res[name]]
        return min(xs) if how == "best" else statistics.median(xs)

    lines = [f"whole process, `perftop run` vs plain ({runs} interleaved runs each):"]
    for how in ("best", "median"):
        wall, cpu = stat("plain", 0, how), stat("plain", 1, how)
        lines.append(f"  {how} of the runs, plain      : {wall * 1e6:7.1f} µs wall, "
                     f"{cpu * 1e6:6.1f} µs process CPU")  # fmt: skip
        for name in res:
            if name != "plain":
                lines.append(
                    f"    added, {name:<19}: {(stat(name, 0, how) - wall) * 1e6:+7.2f} µs/step "
                    f"wall, {(stat(name, 1, how) - cpu) * 1e6:+6.2f} µs/step process CPU"
                )
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--compare", action="append", default=[], metavar="CHECKOUT")
    a = p.parse_args()
    others = {Path(c).name: Path(c).resolve() for c in a.compare}
    print("\n".join(report(measure(a.runs, a.steps, others), a.runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
