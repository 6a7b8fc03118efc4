"""Loops fed without a DataLoader on the training thread, each timing its own batch fetch:
``queue`` (a thread fills a queue.Queue), ``fast_queue`` (one that keeps it full),
``generator``, ``prefetcher`` (a class whose
__next__ takes from a background thread), and ``compiled`` / ``inplace`` (a generator
feeding a torch.compile(model) wrapper / a Module.compile()'d model). Prints one JSON line:
steps, the loop's own fetch wait, and for the compiled ones the outputs and graph count."""

from __future__ import annotations

import json
import queue
import sys
import threading
import time

import torch

STEPS = 40
PERIOD = 0.02  # a batch every 20 ms; a step's compute is a few ms: the loop waits


def batches(n=STEPS, period=PERIOD):
    g = torch.Generator().manual_seed(0)
    for _ in range(n):
        time.sleep(period)
        yield torch.randn(16, 32, generator=g), torch.randn(16, 1, generator=g)


class Prefetcher:
    def __init__(self) -> None:
        self.q: queue.Queue = queue.Queue(maxsize=2)
        threading.Thread(target=self._fill, daemon=True).start()

    def _fill(self) -> None:
        for b in batches():
            self.q.put(b)
        self.q.put(None)

    def __iter__(self):
        return self

    def __next__(self):
        b = self.q.get()
        if b is None:
            raise StopIteration
        return b


def queue_feed(period=PERIOD):
    q: queue.Queue = queue.Queue(maxsize=2)

    def fill() -> None:
        for b in batches(period=period):
            q.put(b)
        q.put(None)

    threading.Thread(target=fill, daemon=True).start()
    return iter(q.get, None)


def main(shape: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    run = model
    if shape == "compiled":
        run = torch.compile(model, backend="eager")
    elif shape == "inplace":
        model.compile(backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    fast = lambda: queue_feed(0.0)  # noqa: E731
    feed = {"queue": queue_feed, "fast_queue": fast, "prefetcher": Prefetcher}.get(shape, batches)()
    wait, n, losses, first = 0.0, 0, [], 0.0
    while True:
        t0 = time.perf_counter()
        b = next(feed, None)
        wait += time.perf_counter() - t0
        if n == 0:
            first = wait
        if b is None:
            break
        x, y = b
        loss = torch.nn.functional.mse_loss(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        n += 1
    out = {
        "shape": shape,
        "steps": n,
        "wait_s": wait,
        "first_wait_s": first,
        "losses": [repr(v) for v in losses],
    }
    if shape in ("compiled", "inplace"):
        from torch._dynamo.utils import counters

        out["graphs"] = counters["stats"]["unique_graphs"]
        out["frames"] = counters["stats"]["calls_captured"]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
