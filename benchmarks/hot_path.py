"""Nanoseconds the hook's hot path costs per training step, without torch's own work.

What torch calls every step, on trivial originals: the DataLoader ``__next__`` wrapper,
the ``backward`` wrapper, and the optimizer pre/post hooks (which close the step), in a
tight loop; the bare loop is subtracted. Best of several repeats. ``--compare`` runs the
same in another checkout (e.g. a build of main) in turn, interleaved, so two versions
are compared with the noise of a shared machine mostly removed.

    python benchmarks/hot_path.py [--repeats 9] [--compare /path/to/checkout]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import sys, time
import torch
import perftop.hook as h
from perftop.hook import impl
st = h.install("/nonexistent/perftop-bench.sock")
t = st.tracker
t.on_step = None  # sync detection has its own benchmark
orig_next = lambda self: 1
orig_bwd = lambda *a, **k: None
if hasattr(t, "wrap_next"):
    nxt, bwd = t.wrap_next(orig_next, torch.is_grad_enabled), t.wrap_backward(orig_bwd)
else:  # a checkout from before the compiled tracker: its C wrappers
    nxt, bwd = impl.speedups.wrap_next(orig_next, t), impl.speedups.wrap_backward(orig_bwd, t)
class It:
    __next__ = nxt
class Bare:
    __next__ = orig_next
it, bare = It(), Bare()
it._perftop_loader = 0  # (a checkout from before on_iter: its loader key)
if hasattr(t, "on_iter"):
    t.on_iter = lambda i: 0
opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
pre, post, args, kw = t.opt_pre_hook, t.opt_post_hook, (opt,), {}
N = 50000
def hooked():
    for _ in range(N):
        next(it); bwd(None, None, False); pre(opt, args, kw); post(opt, args, kw)
def plain():
    for _ in range(N):
        next(bare); orig_bwd(None, None, False)
def best(f):
    out = []
    for _ in range(3):
        t0 = time.perf_counter(); f(); out.append(time.perf_counter() - t0)
    return min(out) / N
print(best(hooked) - best(plain), impl.NAME)
"""


def probe(root: Path, pure: bool) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1")
    env["PERFTOP_PURE"] = "1" if pure else "0"
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, timeout=300, cwd=str(root))  # fmt: skip
    if out.returncode:
        raise RuntimeError(out.stderr[-800:])
    sec, name = out.stdout.split(maxsplit=1)
    return float(sec), name.strip()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--compare", action="append", default=[], metavar="CHECKOUT")
    p.add_argument("--pure", action="store_true", help="also this checkout with PERFTOP_PURE=1")
    a = p.parse_args()
    arms = [("this", ROOT, False)] + [(Path(c).name, Path(c).resolve(), False) for c in a.compare]
    if a.pure:
        arms.append(("this, PERFTOP_PURE=1", ROOT, True))
    best: dict[str, tuple[float, str]] = {}
    for i in range(a.repeats):
        for label, root, pure in arms if i % 2 == 0 else arms[::-1]:
            sec, name = probe(root, pure)
            if label not in best or sec < best[label][0]:
                best[label] = (sec, name)
    print(f"hot path per step (next + backward + optimizer hooks), best of {a.repeats}:")
    for label, (sec, name) in best.items():
        print(f"  {label:<22}: {sec * 1e9:6.0f} ns  [{name}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
