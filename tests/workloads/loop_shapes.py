"""Code shapes from well-known training scripts, each measuring itself. One argument per
shape (several may be given, run in turn); each prints one JSON line ``{"shape": ...}``
with what the job measured about itself: its own step count, its own timers.

- ``reentrant``: a 6-block model under ``torch.utils.checkpoint(use_reentrant=True)``;
- ``grad``: functional training with ``torch.autograd.grad``, no backward(), no optimizer;
- ``producer``: a thread iterates a DataLoader into a queue; the loop times its
  ``queue.get()``;
- ``async-save``: ``torch.save`` on a background thread while training goes on;
- ``thread``: the whole training loop on a non-main thread;
- ``eval``: a ``@torch.no_grad()`` ``estimate_loss()`` over in-memory tensors and a
  sampling pass between steps, one gap with an evaluation and a checkpoint; timed;
- ``compiled``: a compiled model, a compiled optimizer step, both; dynamo's counters.
"""

import json
import os
import queue
import sys
import threading
import time

import torch
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
OUT = os.environ.get("SHAPES_OUT", ".")


def say(**kw):
    print(json.dumps(kw), flush=True)


def mlp(width=32, depth=2):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers)


def reentrant():
    blocks = torch.nn.ModuleList(mlp(64, 3) for _ in range(6))
    opt = torch.optim.SGD(blocks.parameters(), lr=0.01)
    x = torch.randn(256, 64)
    n = 20
    fwd = 0.0
    for _ in range(n):
        t0 = time.perf_counter()
        h = x.requires_grad_()
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=True)
        loss = h.square().mean()
        fwd += time.perf_counter() - t0
        opt.zero_grad()
        loss.backward()
        opt.step()
    say(shape="reentrant", steps=n, forward_s=fwd)


def grad_loop():
    w = [torch.randn(32, 32, requires_grad=True), torch.randn(32, 1, requires_grad=True)]
    x, y = torch.randn(128, 32), torch.randn(128, 1)
    n = 30
    for _ in range(n):
        loss = torch.nn.functional.mse_loss(torch.tanh(x @ w[0]) @ w[1], y)
        grads = torch.autograd.grad(loss, w)
        with torch.no_grad():
            for p, g in zip(w, grads, strict=True):
                p -= 0.01 * g
    say(shape="grad", steps=n)


class Slow(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.randn(32), torch.randn(1)


def producer():
    model = mlp()
    head = torch.nn.Linear(32, 1)
    opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.01)
    q: queue.Queue = queue.Queue(maxsize=8)

    def feed():
        for batch in DataLoader(Slow(), batch_size=2):
            q.put(batch)
        q.put(None)

    threading.Thread(target=feed, daemon=True).start()
    wait = 0.0
    n = 0
    slept: list[float] = []  # each sleep's time off the CPU (wall less this thread's CPU)
    t_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        batch = q.get()
        wait += time.perf_counter() - t0
        if batch is None:
            break
        x, y = batch
        opt.zero_grad()
        torch.nn.functional.mse_loss(head(model(x)), y).backward()
        opt.step()
        w, c = time.perf_counter(), time.thread_time()
        time.sleep(0.03)  # the step's own work: the producer keeps ahead of it
        slept.append((time.perf_counter() - w) - (time.thread_time() - c))
        n += 1
    say(
        shape="producer", steps=n, wait_s=wait, slept_s=slept, total_s=time.perf_counter() - t_start
    )


def async_save():
    model = mlp(64, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 64)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    saver = threading.Thread(target=lambda: [torch.save(state, f"{OUT}/a{i}.pt") or
                                             time.sleep(0.02) for i in range(10)])  # fmt: skip
    n = 60
    t0 = time.perf_counter()
    saver.start()
    for _ in range(n):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        time.sleep(0.005)
    saver.join()
    say(shape="async-save", steps=n, total_s=time.perf_counter() - t0)


def on_thread():
    out = {}

    def train():
        model = mlp()
        opt = torch.optim.Adam(model.parameters())
        loader = DataLoader(Slow(), batch_size=4)
        n = 0
        for x, _ in loader:
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
            n += 1
        out["n"] = n

    th = threading.Thread(target=train)
    th.start()
    th.join()
    say(shape="thread", steps=out["n"])


def evaluation():
    model = mlp(64, 3)
    head = torch.nn.Linear(64, 64)
    opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=1e-3)
    data = torch.randn(4096, 64)

    def get_batch():
        i = torch.randint(0, 4000, (32,))
        return data[i], data[i + 1]

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        out = sum(float(torch.nn.functional.mse_loss(head(model(x)), y))
                  for x, y in (get_batch() for _ in range(40)))  # fmt: skip
        model.train()
        return out

    @torch.no_grad()
    def sample(tokens=500):
        h = data[:1]
        for _ in range(tokens):
            h = torch.tanh(head(model(h)))
        return h

    n = 60
    eval_s = sample_s = save_s = 0.0
    evals = samples = 0
    for it in range(n):
        if it % 20 == 0:
            t0 = time.perf_counter()
            estimate_loss()
            eval_s += time.perf_counter() - t0
            evals += 1
            t0 = time.perf_counter()
            torch.save(model.state_dict(), f"{OUT}/e.pt")
            save_s += time.perf_counter() - t0
        x, y = get_batch()
        opt.zero_grad()
        torch.nn.functional.mse_loss(head(model(x)), y).backward()
        opt.step()
        if it % 20 == 10:
            t0 = time.perf_counter()
            sample()
            sample_s += time.perf_counter() - t0
            samples += 1
    say(shape="eval", steps=n, eval_s=eval_s, evals=evals, sample_s=sample_s,
        samples=samples, save_s=save_s)  # fmt: skip


def compiled():
    import torch._dynamo

    res = {}
    x = torch.randn(16, 32)
    backend = os.environ.get("SHAPES_BACKEND", "eager")  # inductor: the same graphs, slower
    # "sched" first: before the process's first compile (perftop's way of timing opt.step()
    # changes there, and the scheduler holds what it was)
    for name in ("sched", "opt", "both", "fullgraph", "no_grad"):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        # an LR scheduler made before the compile holds the class's step as it was then
        sched = torch.optim.lr_scheduler.StepLR(opt, 2) if name == "sched" else None
        full = name == "fullgraph"  # the model with fullgraph=True, and the optimizer step
        fwd = torch.compile(model, backend=backend, fullgraph=full) if name != "opt" else model

        def opt_step(opt=opt):
            opt.step()

        def no_grad_eval(x, model=model):
            with torch.no_grad():
                return model(x).sum()

        step = torch.compile(opt_step, backend=backend)
        ev = torch.compile(no_grad_eval, backend=backend)
        ok = True
        try:
            for _ in range(3):
                fwd(x).square().mean().backward()
                step()
                if sched is not None:
                    sched.step()
                opt.zero_grad()
                if name == "no_grad":
                    ev(x)
        except Exception as exc:  # the job's own outcome
            ok = type(exc).__name__
        c = torch._dynamo.utils.counters
        res[name] = {"ok": ok, "unique_graphs": c["stats"]["unique_graphs"],
                     "graph_break": sum(c["graph_break"].values())}  # fmt: skip
    say(shape="compiled", steps=15, **res)


SHAPES = {"reentrant": reentrant, "grad": grad_loop, "producer": producer,
          "async-save": async_save, "thread": on_thread, "eval": evaluation,
          "compiled": compiled}  # fmt: skip

if __name__ == "__main__":
    for s in sys.argv[1:]:
        SHAPES[s]()
