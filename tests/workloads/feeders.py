"""Loops fed without a DataLoader on the training thread, each timing its own batch fetch:
``queue`` (a thread fills a queue.Queue), ``fast_queue`` (one that keeps it full),
``generator`` (one slow batch, one evaluation, a checkpoint of two saves every
SAVE_EVERY steps), ``prefetcher`` (a class whose
__next__ takes from a background thread), and ``compiled`` / ``inplace`` (a generator
feeding a torch.compile(model) wrapper / a Module.compile()'d model). Prints one JSON line:
steps, the loop's own fetch wait, and for the compiled ones the outputs and graph count."""

from __future__ import annotations

import io
import json
import queue
import sys
import threading
import time

import torch

STEPS = 40
PERIOD = 0.02  # a batch every 20 ms; a step's compute is a few ms: the loop waits
# ``generator``: batch SLOW_AT takes SLOW periods (a shard opened); after step EVAL_AT an
# evaluation ends with EVAL_SLEEP s off the CPU (its metrics written), the loop timing it
SLOW_AT, SLOW, EVAL_AT, EVAL_SLEEP = 6, 4, 10, 0.04
SAVE_EVERY = 5  # ``generator``: after steps 2, 7, 12, ... a checkpoint (model, optimizer)


def batches(n=STEPS, period=PERIOD, slow_at=-1):
    g = torch.Generator().manual_seed(0)
    for i in range(n):
        time.sleep(period * (SLOW if i == slow_at else 1))
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
    slow = lambda: batches(slow_at=SLOW_AT)  # noqa: E731
    feeds = {"queue": queue_feed, "fast_queue": fast, "prefetcher": Prefetcher, "generator": slow}
    feed = feeds.get(shape, batches)()
    wait, n, losses, first, evals, saves = 0.0, 0, [], 0.0, [], 0
    # The training thread's own time off the CPU from each step's end to the next step's
    # forward (wall less its CPU time): what perftop's data wait behind a feeder is. The
    # wait in next() is part of it; a busy host adds a wait for a core, or for the GIL
    # while the feeder thread holds it, outside next() too.
    # Taken from the optimizer's own post-hook (torch runs it before the global ones
    # perftop's step end is) to the model's own forward pre-hook (run after the global
    # one perftop's wait ends at): a span that holds perftop's.
    mark: list = [None, 0.0]  # (wall, thread CPU) at the step's end; the sum so far

    def step_end(*_):
        mark[0] = (time.perf_counter(), time.thread_time())

    def forward_began(*_):
        if mark[0] is not None and torch.is_grad_enabled():
            mark[1] += time.perf_counter() - mark[0][0] - (time.thread_time() - mark[0][1])
            mark[0] = None

    if shape not in ("compiled", "inplace"):  # those compile the same as without perftop
        opt.register_step_post_hook(step_end)
        model.register_forward_pre_hook(forward_began)
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
        if shape == "generator" and n == EVAL_AT:
            t1 = time.perf_counter()
            with torch.no_grad():
                run(x)
                time.sleep(EVAL_SLEEP)
            evals.append(time.perf_counter() - t1)
            step_end()  # the pass's time is its own
        if shape == "generator" and n % SAVE_EVERY == 2:
            torch.save(model.state_dict(), io.BytesIO())
            torch.save(opt.state_dict(), io.BytesIO())
            saves += 1
            step_end()  # the checkpoint's time is its own
    out = {
        "shape": shape,
        "steps": n,
        "wait_s": wait,
        "first_wait_s": first,
        "blocked_s": mark[1],
        "losses": [repr(v) for v in losses],
        "evals": evals,
        "checkpoints": saves,
    }
    if shape in ("compiled", "inplace"):
        from torch._dynamo.utils import counters

        out["graphs"] = counters["stats"]["unique_graphs"]
        out["frames"] = counters["stats"]["calls_captured"]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
