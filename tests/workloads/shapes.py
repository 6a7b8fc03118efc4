"""Training loops of the shapes that decide step boundaries, one per argument:

- ``lbfgs``: ``optimizer.step(closure)``, the closure evaluated several times per step;
- ``lbfgs-wait``: the same, each closure off the CPU 5 ms before its forward, and 8 ms of
  CPU work between steps (a log line); prints the loop's time off the CPU between steps
  (from a step's last closure to the next one's first sleep) as JSON first;
- ``replaced``: an SGD warm-up optimizer, freed, then Adam on the same model;
- ``replaced-alive``: the same with the warm-up optimizer still referenced;
- ``eval``: a plain loop with an evaluation pass under no_grad and a checkpoint per epoch;
- ``eval-grad``: the evaluation pass with grad left on (as the HF Trainer fetches).

Each prints ``steps N`` with the number of optimizer iterations it ran.
"""

import gc
import json
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
shape = sys.argv[1]
out = sys.argv[2] if len(sys.argv) > 2 else "ckpt.pt"
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
x, y = torch.randn(64, 8), torch.randn(64, 1)


def loss_fn():
    return torch.nn.functional.mse_loss(model(x), y)


if shape in ("lbfgs", "lbfgs-wait"):
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=8)

    last, between, first = [time.perf_counter(), time.thread_time()], [], [True]

    def closure():
        opt.zero_grad()
        if shape == "lbfgs-wait":
            if first[0]:  # the step's first closure
                first[0] = False
                between.append(time.perf_counter() - last[0] - (time.thread_time() - last[1]))
            time.sleep(0.005)  # off the CPU inside the optimizer step, before the forward
        loss = loss_fn()
        loss.backward()
        last[:] = time.perf_counter(), time.thread_time()
        return loss

    n = 5
    for i in range(n):
        if shape == "lbfgs-wait" and i:
            t = time.thread_time()
            while time.thread_time() - t < 0.008:  # a log line's 8 ms of CPU between steps
                pass
        first[0] = True
        opt.step(closure)
    if shape == "lbfgs-wait":
        print(json.dumps({"off_cpu_between": between}))

elif shape in ("replaced", "replaced-alive"):
    warm = torch.optim.SGD(model.parameters(), lr=0.01)
    n = 0
    for _ in range(5):
        warm.zero_grad()
        loss_fn().backward()
        warm.step()
        n += 1
    keep = warm if shape == "replaced-alive" else None
    del warm
    gc.collect()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(7):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
        n += 1

elif shape in ("eval", "eval-grad"):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    train = DataLoader(TensorDataset(x, y), batch_size=8)
    val = DataLoader(TensorDataset(torch.randn(32, 8), torch.randn(32, 1)), batch_size=8)
    n = 0
    for _ in range(3):
        for xb, yb in train:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(xb), yb).backward()
            opt.step()
            n += 1
        model.eval()
        with torch.set_grad_enabled(shape == "eval-grad"):
            for xb, _yb in val:
                with torch.no_grad():
                    model(xb)
                time.sleep(0.05)  # a slow evaluation: 0.2 s per pass
        model.train()
        torch.save(model.state_dict(), out)

else:
    raise SystemExit(f"unknown shape {shape}")
print("steps", n)
