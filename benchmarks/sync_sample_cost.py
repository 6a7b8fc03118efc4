"""What one sampled step of the sync detector costs, in CPU time of the training thread
(steady under a loaded machine, where whole-run times are not): the step of
``e2e_overhead.py`` (two Linear layers, SGD, one torch thread) plainly, watched, primed
(the step before a watched one: marks only), with a bare ``TorchFunctionMode`` (torch's
own floor for a Python mode), and the two plain steps after a watched one (after-effects
the sampler's budget does not see). Medians over interleaved repeats; ``--compare
CHECKOUT`` runs another checkout's detector beside this one.

    python benchmarks/sync_sample_cost.py [--repeats 300] [--compare /path/to/checkout]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

JOB = r"""
import statistics, sys, time, torch
from torch.overrides import TorchFunctionMode
from perftop.hook import frames, sync_detect
from perftop.hook.sync_collector import Collector
torch.set_num_threads(1)
frames.configure()
class State:
    def internal_error(self, where): raise RuntimeError(where)
col = Collector(lambda ev: None, lambda: 1)
det = sync_detect.make_detector(torch, col, State())
class Bare(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
X, Y = torch.randn(16, 64), torch.randn(16, 8)
def step():
    x, y = X.to("cpu"), Y.to("cpu")
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return f"{loss:.3f}"
clock = time.thread_time
def timed(before, after):
    before(); t = clock(); step(); d = clock() - t; after(); return d
nothing = lambda: None
for _ in range(50):
    step()
out = {k: [] for k in ("plain", "watched", "primed", "bare", "after")}
prime = getattr(det, "prime", None) or det.start  # a checkout without priming: watched
for _ in range(int(sys.argv[1])):
    out["plain"].append(timed(nothing, nothing))
    out["watched"].append(timed(det.start, det.stop))
    col.log.clear()
    t = clock(); step(); step(); out["after"].append((clock() - t) / 2)
    out["primed"].append(timed(prime, det.stop))
    col.log.clear()
    mode = Bare()
    out["bare"].append(timed(mode.__enter__, lambda: mode.__exit__(None, None, None)))
med = {k: statistics.median(v) * 1e6 for k, v in out.items()}
print("RESULT", *(f"{med[k]:.1f}" for k in ("plain", "watched", "primed", "bare", "after")))
"""


def run(root: Path, repeats: int) -> list[float]:
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1", PERFTOP_SOCKET="")
    out = subprocess.run([sys.executable, "-c", JOB, str(repeats)], env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            return [float(v) for v in line.split()[1:]]
    raise SystemExit(f"{root}: {out.stderr[-800:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=300)
    ap.add_argument("--compare", action="append", default=[], metavar="CHECKOUT")
    args = ap.parse_args()
    print("µs of training-thread CPU per step (medians); + is over the plain step:")
    for name, root in {"this": ROOT, **{Path(c).name: Path(c) for c in args.compare}}.items():
        plain, watched, primed, bare, after = run(root, args.repeats)
        print(
            f"  {name:<8} plain {plain:6.1f}  watched {watched - plain:+6.1f}  primed "
            f"{primed - plain:+6.1f}  bare mode {bare - plain:+6.1f}  each step after a "
            f"watched one {after - plain:+5.1f}"
        )


if __name__ == "__main__":
    main()
