"""Loop shapes that libraries' loops have (issue 44), each with its own counters printed as
JSON on the last line: ``lib_shapes.py SHAPE``.

- ``accum_slow``: gradient accumulation, 4 micro-batches per update, the first update's
  micro-batches slow (1.8 s each: the first update comes 7 s after the first backward);
- ``idle_after``: 30 steps in a thread that then returns; the process idles (as a Ray
  Train worker does) until killed;
- ``prefetch``: a starved DataLoader behind a wrapper that fetches the next batch ahead
  (Ray Train's ``prepare_data_loader``), 3 epochs;
- ``input_then_compute``: 8 s of steps starved by a slow DataLoader (input-bound), then
  9 s of 10 ms steps on batches in memory (the loop is compute-bound until the end; the
  host sleeps through each step's compute, as it waits for a GPU's: no core is taken);
- ``save_burst``: 3 epochs of steps, each followed by one checkpoint made of three
  ``torch.save`` calls (model, optimizer, state: ``accelerator.save_state``) with 50 ms of
  its own code before each but the first; the last checkpoint is followed by an
  evaluation (``no_grad`` forwards), in the same time between steps;
- ``save_file_then_eval``: mmengine's epoch end, 3 epochs and a last one of steps: a
  checkpoint serialized into a BytesIO, then written to its file (``CheckpointHook``),
  then a validation over its own DataLoader whose batches are fetched with grad on and
  run under ``no_grad`` (``ValLoop``).
"""

import io
import json
import os
import sys
import threading
import time

import torch
from core_wait import run_delay
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
torch.set_num_threads(1)
own = {
    "updates": 0,
    "steps": 0,
    "saves": 0,
    "checkpoints": 0,
    "checkpoint_s": [],
    "checkpoint_wait_s": [],
}


def say():
    print(json.dumps(own), flush=True)


def model_opt():
    model = torch.nn.Linear(8, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def accum_slow():
    model, opt = model_opt()
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    for update in range(4):
        for _micro in range(4):
            if update == 0:
                time.sleep(1.8)  # the first update's micro-batches: data loading warms up
            ((model(x) - y) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()
        own["updates"] += 1


def idle_after():
    """Trains in a thread of its own (as a Ray Train worker's function), then idles."""
    t = threading.Thread(target=train_then_return)
    t.start()
    t.join()
    own["pid"] = os.getpid()
    say()
    time.sleep(600)  # idles after its last step, alive, until killed


def train_then_return():
    model, opt = model_opt()
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    for _ in range(30):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        time.sleep(0.01)
        own["steps"] += 1


class Slow(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        time.sleep(0.004)  # 16 ms per batch of 4, loaded in the loop: starved
        return torch.randn(8), torch.randn(1)


class Prefetch:
    """Fetches the next batch before handing out the current one (the last batch of an
    epoch then makes no fetch of its own)."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        it = iter(self.loader)
        nxt = next(it, None)
        while nxt is not None:
            cur, nxt = nxt, next(it, None)
            yield cur


def prefetch():
    model, opt = model_opt()
    for _epoch in range(3):
        for x, y in Prefetch(DataLoader(Slow(), batch_size=4)):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
            time.sleep(0.002)
            own["steps"] += 1


def prefetch_two_optims():
    """The same behind two optimizers, each after its own backward: the first closes the
    steps, so each step's first forward (the second model's) comes before its batch's
    fetch, and only an epoch's end times a wait before it."""
    model, opt = model_opt()
    head, opt2 = model_opt()
    for _epoch in range(3):
        for x, y in Prefetch(DataLoader(Slow(), batch_size=4)):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
            opt2.zero_grad()
            ((head(x) - y) ** 2).mean().backward()
            opt2.step()
            time.sleep(0.002)
            own["steps"] += 1


def input_then_compute():
    model, opt = model_opt()
    t_end = time.perf_counter() + 8
    while time.perf_counter() < t_end:
        for x, y in DataLoader(Slow(), batch_size=4):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
            own["steps"] += 1
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    t_end = time.perf_counter() + 9
    while time.perf_counter() < t_end:
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        time.sleep(0.01)  # the model's compute on a device, which the host waits for
        own["steps"] += 1


def save_burst():
    model, opt = model_opt()
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    for _epoch in range(3):
        for _ in range(10):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
            own["steps"] += 1
        # The state dicts are built before the first save (perftop sees the saves, not what
        # prepared the first: 3 ms of it under load on CI), so the timer starts at the first.
        objs = (model.state_dict(), opt.state_dict(), {"epoch": _epoch})
        q, t = run_delay(), time.perf_counter()
        for i, obj in enumerate(objs):
            if i:
                time.sleep(0.05)  # the checkpoint's own code: a state dict, a folder
            torch.save(obj, io.BytesIO())
            own["saves"] += 1
        own["checkpoint_s"].append(time.perf_counter() - t)
        own["checkpoint_wait_s"].append(run_delay() - q)
        own["checkpoints"] += 1
        if _epoch == 2:
            t = time.perf_counter()
            with torch.no_grad():
                for _ in range(5):
                    model(x)
                    own["eval_work_s"] = time.perf_counter() - t  # to its last forward
                    time.sleep(0.01)
            own["eval_s"] = time.perf_counter() - t


def save_file_then_eval():
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10))  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(320, 512), torch.randint(0, 10, (320,)))
    train, val = DataLoader(data, batch_size=32), DataLoader(data, batch_size=64)
    own["eval_s"] = []
    path = os.path.join(os.getcwd(), "ckpt.pth")
    for epoch in range(4):
        for x, y in train:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            own["steps"] += 1
        if epoch == 3:
            break
        q, t = run_delay(), time.perf_counter()
        with io.BytesIO() as f:  # 2 MiB of weights, then the file
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, f)
            with open(path, "wb") as out:
                out.write(f.getvalue())
        own["saves"] += 1
        t1 = time.perf_counter()
        own["checkpoint_s"].append(t1 - t)
        own["checkpoint_wait_s"].append(run_delay() - q)
        for x, _ in val:
            with torch.no_grad():
                model(x)
            time.sleep(0.01)  # the metric's own work
        own["eval_s"].append(time.perf_counter() - t1)


if __name__ == "__main__":
    {"accum_slow": accum_slow, "idle_after": idle_after, "prefetch": prefetch,
     "input_then_compute": input_then_compute, "save_burst": save_burst,
     "prefetch_two_optims": prefetch_two_optims,
     "save_file_then_eval": save_file_then_eval}[sys.argv[1]]()  # fmt: skip
    say()
