"""The hook's own cost on the training thread, measured inside one process: blocks of the
same training steps with perftop's patches in place and with torch's own functions,
in a fresh random order each round, under a real ``perftop run``.

Why inside one process: where a process's code and data lie moves a step's time by itself
(plain runs of this job spread over ~15 µs a step between processes; see
``e2e_overhead.py``), so a whole-process figure needs ~120 rounds to be good to ±0.8 µs.
In one process every block has the same layout: 100 pairs of 500-step blocks give the
hook's cost to about ±0.5 µs in half a minute, and arms can be taken apart. What it does
not see is what perftop costs outside the job's training thread (the monitor sampling the
process from outside: ``e2e_overhead.py`` has it, whole process against plain).

The job is ``e2e_overhead.py``'s step (a DataLoader batch, two Linear layers, backward,
SGD, one torch thread). After a warm-up under perftop it reads which of torch's attributes
the hook replaced (the hook's own undo list, run once: what differs before and after) and
then sets either set per block. The sync detector's callback stays in place, so sampled
steps happen in the ``perftop`` arm as they do in a job; but one falls in few blocks, so
the median leaves most of their cost out: the mean, also printed, has it. Arms:

- ``perftop``: the hook as installed;
- ``wrappers`` (``--floor``): a Python pass-through with the wrapped function's own
  signature at each of the three places perftop times (``torch.autograd.backward``, a
  DataLoader iterator's ``__next__``, ``SGD.step``) and nothing else: the least any wrapper
  there costs;
- ``call-through-C`` (``--floor``): the same, each calling through a C function
  (``operator.call``), as a C pass-through does: the interpreter entered again from C.

    python benchmarks/hook_inprocess.py [--rounds 100] [--steps 500] [--floor]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

JOB = r"""
import json, operator, random, sys, time
import torch
import torch.utils.data.dataloader as dl
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0); torch.set_num_threads(1)
rounds, per, arms = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(1 << 18, 64), torch.randn(1 << 18, 8))
it = iter(())
def steps(n):
    global it
    for _ in range(n):
        batch = next(it, None)
        if batch is None:
            it = iter(DataLoader(data, batch_size=16))
            batch = next(it)
        x, y = batch
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
steps(300)
import perftop.hook
st = perftop.hook.state()
if st is None or not st.torch_patched:
    sys.exit("the hook did not arm: run under perftop run")
owners = [torch, torch.autograd, torch.Tensor, torch.nn.Module, torch.optim.Optimizer,
          torch.optim.SGD, dl._BaseDataLoaderIter, dl._SingleProcessDataLoaderIter,
          torch.serialization]
tr = st.tracker
kept = tr.on_step, tr.on_between  # the detector's callbacks stay: undo would drop them
patched = [dict(o.__dict__) for o in owners]
for undo in reversed(list(st.undo)):
    undo()
tr.on_step, tr.on_between = kept
own = [dict(o.__dict__) for o in owners]
sets = {"perftop": [], "torch": []}
for o, a, b in zip(owners, patched, own):
    for k in set(a) | set(b):
        if a.get(k) is not b.get(k):
            sets["perftop"].append((o, k, a.get(k)))
            sets["torch"].append((o, k, b.get(k)))
bw, nx, sp = torch.autograd.backward, dl._BaseDataLoaderIter.__next__, torch.optim.SGD.step
def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    return bw(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)
def next_(self):
    return nx(self)
def step(self, *args, **kwargs):
    return sp(self, *args, **kwargs) if args or kwargs else sp(self)
call = operator.call
def backward_c(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
               grad_variables=None, inputs=None):
    return call(bw, tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)
def next_c(self):
    return call(nx, self)
def step_c(self, *args, **kwargs):
    return sp(self, *args, **kwargs) if args or kwargs else call(sp, self)
places = ((torch.autograd, "backward"), (dl._BaseDataLoaderIter, "__next__"),
          (torch.optim.SGD, "step"))
for name, fns in (("wrappers", (backward, next_, step)),
                  ("call-through-C", (backward_c, next_c, step_c))):
    sets[name] = sets["torch"] + [(o, k, f) for (o, k), f in zip(places, fns)]
def use(arm):
    for o, k, v in sets[arm]:
        if v is None:
            if k in o.__dict__:
                delattr(o, k)
        else:
            setattr(o, k, v)
res = {a: [] for a in arms}
shuffle = random.Random(0).shuffle
for r in range(rounds):
    order = list(arms)
    shuffle(order)  # no arm always next to another: what a block leaves behind is noise
    for arm in order:
        use(arm)
        steps(20)  # the arm's first steps: caches settle on its code
        t0 = time.perf_counter()
        steps(per)
        res[arm].append((time.perf_counter() - t0) / per)
use("perftop")
print("RESULT", json.dumps(res))
"""


def _median_ci():  # one implementation: e2e_overhead.py's interval of a median
    spec = importlib.util.spec_from_file_location(
        "e2e", Path(__file__).with_name("e2e_overhead.py")
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.median_ci


def run_job(source: str, *args: str) -> dict[str, list[float]]:
    """``source`` run as a job under ``perftop run --headless`` (one torch thread, this
    checkout's perftop): the JSON of its ``RESULT`` line."""
    with tempfile.TemporaryDirectory() as d:
        job = Path(d) / "job.py"
        job.write_text(source)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
        cmd = [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--",
               sys.executable, str(job), *args]  # fmt: skip
        out = subprocess.run(cmd, env=env, cwd=d, capture_output=True, text=True, timeout=1200)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return {k: list(v) for k, v in json.loads(line[7:]).items()}
    raise SystemExit(f"the job failed: {out.stderr.strip()[-800:]}")


def measure(rounds: int, steps: int, arms: list[str]) -> dict[str, list[float]]:
    return run_job(JOB, str(rounds), str(steps), ",".join(arms))


def report(res: dict[str, list[float]]) -> list[str]:
    median_ci = _median_ci()
    base = res["torch"]
    n = len(base)
    lines = [
        f"one process under `perftop run`, {n} rounds, each arm once a round in random order; "
        "the median "
        "over rounds of (arm - that round's torch block), its 95% confidence interval",
        f"  torch's own functions: {statistics.median(base) * 1e6:7.2f} µs/step (median block)",
    ]
    for arm, got in res.items():
        if arm == "torch":
            continue
        d = sorted((a - b) * 1e6 for a, b in zip(got, base, strict=True))
        lo, hi = median_ci(d)
        med = statistics.median(d)
        ratio = (statistics.median(base) * 1e6 + med) / (statistics.median(base) * 1e6)
        mean = statistics.fmean(d)
        half = 1.96 * statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else math.inf
        lines.append(
            f"  {arm:<15} {med:+6.2f} µs/step, 95% CI [{lo:+6.2f} .. {hi:+6.2f}]; ratio {ratio:.4f}"
            f"; mean {mean:+6.2f} ± {half:.2f}"
        )
    lines.append(
        "  (the median leaves out what falls in few blocks: a sampled sync step, about one "
        "in 2,000-5,000 steps; the mean has it, with more noise)"
    )
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--steps", type=int, default=500, help="timed steps per block")
    p.add_argument("--floor", action="store_true",
                   help="add the bare-wrapper arms: what any wrapper at those places costs")  # fmt: skip
    a = p.parse_args()
    arms = ["torch", "perftop"] + (["wrappers", "call-through-C"] if a.floor else [])
    print("\n".join(report(measure(a.rounds, a.steps, arms))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
