"""Evaluations in loops of every shape, each timed by the loop itself. One argument, the
shape; prints one JSON line ``{"shape": ...}`` with its steps and each pass's own time.

- ``manual``: no torch.optim: a module's ``loss.backward()`` then ``p.add_`` under ``no_grad``; a
  decorated ``evaluate()`` after each epoch's last step (the last one after the run's last
  step), then a final test pass and a ``torch.save`` after the loop;
- ``lbfgs``: ``optimizer.step(closure)`` then a ``no_grad`` prediction after every step,
  with a sync line (``.item()``) in it;
- ``val_loader``: a DataLoader loop with an evaluation over a validation DataLoader under
  ``no_grad`` every 40 steps, then a final one under ``inference_mode``, a ``torch.save``
  and an idle second (a process waiting for its peers, a log upload): a pass that its
  first batch opens (no module call with grad off begins it);
- ``clock_step``: val_loader's, with the system clock set 0.5 s forward after step 60,
  between its first two evaluations (as a VM's is after a pause or a migration; ``CLOCK_STEP_S``: by that much);
- ``epoch_valid``: skorch's loop: after each epoch, a validation whose batches are fetched
  with grad on (the forward under ``no_grad`` inside the loop), then the epoch's end
  (scoring, a printed row: 50 ms of the loop's CPU), then the next epoch's first batch;
  each fetch timed by the loop.
"""

import contextlib
import json
import os
import sys
import time

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
perf = time.perf_counter
own = {"steps": 0, "evals": [], "saves": [], "eval_at": []}  # eval_at: wall-clock bounds


def say():
    print(json.dumps(own), flush=True)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(64, 64))
        self.w2 = torch.nn.Parameter(torch.randn(64, 1))

    def forward(self, x):
        return torch.tanh(x @ self.w1) @ self.w2


def manual():
    own["shape"] = "manual"
    net = Net()  # a module: perftop sees a pass by its forward with grad off
    w1, w2 = net.w1, net.w2
    x, y = torch.randn(2048, 64), torch.randn(2048, 1)
    xe = torch.randn(4096, 64)

    @torch.no_grad()
    def evaluate():
        t, wall = perf(), time.time()
        for _ in range(40):
            out = net(xe)
        acc = (out > 0).float().mean().item()
        own["evals"].append(perf() - t)
        own["eval_at"].append((wall, time.time()))
        return acc

    for _epoch in range(4):
        for j in range(30):
            xb, yb = x[j * 64 : (j + 1) * 64], y[j * 64 : (j + 1) * 64]
            loss = torch.nn.functional.mse_loss(net(xb), yb)
            loss.backward()
            with torch.no_grad():
                for p in (w1, w2):
                    p.add_(p.grad, alpha=-1e-3)
                    p.grad = None
            own["steps"] += 1
        evaluate()
    evaluate()  # a final test pass after the last step
    t = perf()
    torch.save({"w1": w1, "w2": w2}, os.path.join(os.environ.get("SHAPES_OUT", "."), "w.pt"))
    own["saves"].append(perf() - t)


def lbfgs():
    own["shape"] = "lbfgs"
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=20)
    x, y = torch.randn(512, 32), torch.randn(512, 1)
    xt = torch.randn(8192, 32)
    for _ in range(6):

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss

        opt.step(closure)
        own["steps"] += 1
        t = perf()
        with torch.no_grad():
            for _ in range(30):
                pred = model(xt)
            own["pred"] = pred.mean().item()  # a sync line of the prediction
        own["evals"].append(perf() - t)


def val_loader(periodic=torch.no_grad, shape="val_loader"):
    own["shape"] = shape
    from torch.utils.data import DataLoader, TensorDataset

    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    train = DataLoader(TensorDataset(torch.randn(2048, 32), torch.randn(2048, 1)), batch_size=16)
    val = DataLoader(TensorDataset(torch.randn(4096, 32), torch.randn(4096, 1)), batch_size=64)

    def evaluate(mode):
        t, wall = perf(), time.time()
        model.eval()
        total = 0.0
        with mode():
            for xv, yv in val:
                total += torch.nn.functional.mse_loss(model(xv), yv).item()
        model.train()
        own["evals"].append(perf() - t)
        own["eval_at"].append((wall, time.time()))
        return total

    for xb, yb in train:
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        own["steps"] += 1
        if shape == "clock_step" and own["steps"] == 60:
            # midway between two evaluations, and a send of the hook's after it (0.3 s:
            # stamps follow the clock from its next send; what ended before may carry either)
            step_clock(float(os.environ.get("CLOCK_STEP_S", "0.5")))
            time.sleep(0.3)
        if own["steps"] % 40 == 0:
            evaluate(periodic)
    evaluate(torch.inference_mode)  # a final test after the last step
    t = perf()
    torch.save(model.state_dict(), os.path.join(os.environ.get("SHAPES_OUT", "."), "m.pt"))
    own["saves"].append(perf() - t)
    say()
    time.sleep(1.0)  # idle: no pass, no step


def epoch_valid():
    own["shape"] = "epoch_valid"
    from torch.utils.data import DataLoader, TensorDataset

    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(512, 32), torch.randn(512, 1))
    train = DataLoader(data, batch_size=16, shuffle=True)
    val = DataLoader(TensorDataset(torch.randn(2048, 32), torch.randn(2048, 1)), batch_size=64)
    own["fetch"] = []  # each step's fetch, by the loop's clock
    for epoch in range(4):
        it = iter(train)
        while True:
            t = perf()
            try:
                xb, yb = next(it)
            except StopIteration:
                break
            own["fetch"].append(perf() - t)
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            own["steps"] += 1
        t, wall = perf(), time.time()
        model.eval()
        total = 0.0
        for xv, yv in val:  # fetched with grad on, as skorch's iterator_valid is
            with torch.no_grad():
                total += torch.nn.functional.mse_loss(model(xv), yv).item()
        model.train()
        end = perf() + 0.05  # the epoch's end: its scores and its row of the table
        while perf() < end:
            pass
        print(f"epoch {epoch} valid_loss {total:.4f}", flush=True)
        own["evals"].append(perf() - t)
        own["eval_at"].append((wall, time.time()))


def step_clock(by):
    """The system clock set ``by`` seconds forward, for this process alone: its
    ``time.time()`` (the loop's own timer, and perftop's hook in it) reads that much later
    against ``perf_counter`` from now on, as after a clock step. (Setting the host's clock
    would move every other test's too.)"""
    real = time.time
    time.time = lambda: real() + by


def grad_valid():
    """val_loader's, its periodic evaluations with grad on (the model in eval mode, no
    ``no_grad``): each batch's forward well under a millisecond."""
    val_loader(contextlib.nullcontext, "grad_valid")


{
    "manual": manual,
    "lbfgs": lbfgs,
    "val_loader": val_loader,
    "epoch_valid": epoch_valid,
    "grad_valid": grad_valid,
    "clock_step": lambda: val_loader(torch.no_grad, "clock_step"),
}[sys.argv[1]]()
if own["shape"] not in ("val_loader", "grad_valid", "clock_step"):
    say()
