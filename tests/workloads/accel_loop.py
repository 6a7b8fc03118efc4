"""A loop of HF accelerate's (issue 44): gradient accumulation over 4 micro-batches
(``accelerator.accumulate``), an evaluation pass over a held-out loader after each epoch
and ``accelerator.save_state`` every few updates, each timed by the job itself. Prints one
JSON line: its updates (``sync_gradients``), micro-batches, evaluations and saves, each
with its own time, and its data wait (each fetch but the first, which starts the loader),
the time from the start of each epoch's last update to the end of the next epoch's first
forward (``gaps``: the evaluation and all around it, with some of both steps), each
``save_state``'s files written (``writes``: from its first write's start to its last's end,
its ``torch.save`` and safetensors calls timed by the job), each run of its save-state hook
(``pre``: before the first write), and the held-out loss on stderr."""

import functools
import json
import os
import sys
import tempfile
import time

import accelerate.utils.other
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

EPOCHS, BATCHES, ACC, SAVE_EVERY = 2, 24, 4, 4
perf = time.perf_counter
SPAN: list[float] = []  # the save_state under way: its first write's start, its last's end


def timed(write):
    """``write`` (torch.save, safetensors' save_file as accelerate calls it), its span
    added to the save_state under way."""

    @functools.wraps(write)
    def call(*args, **kwargs):
        t = perf()
        try:
            return write(*args, **kwargs)
        finally:
            if SPAN:
                SPAN[:] = [min(SPAN[0], t), max(SPAN[1], perf())]

    return call


torch.save = timed(torch.save)
accelerate.utils.other.safe_save_file = timed(accelerate.utils.other.safe_save_file)


def pre_save(own, models, weights, output_dir) -> None:
    """A save-state hook of the job's, run by ``save_state`` before its first write: a
    manifest of the weights, and a 20 ms wait (as a hook asking a remote store for room)."""
    t = perf()
    sizes = {k: list(v.shape) for w in weights for k, v in w.items()}
    with open(os.path.join(output_dir, "manifest.json"), "w") as f:
        json.dump(sizes, f)
    time.sleep(0.02)
    own["pre"].append(perf() - t)


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    acc = Accelerator(gradient_accumulation_steps=ACC, cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    # a frozen table of 8 MB in the state dict: the model's safetensors file is most of what
    # save_state writes, as a real model's weights are beside a light optimizer's state
    model.register_buffer("table", torch.randn(2_000_000))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train = DataLoader(
        TensorDataset(torch.randn(16 * BATCHES, 32), torch.randn(16 * BATCHES, 1)), batch_size=16
    )
    held = DataLoader(TensorDataset(torch.randn(16 * 8, 32), torch.randn(16 * 8, 1)), batch_size=16)
    model, opt, train, held = acc.prepare(model, opt, train, held)
    own = {
        "pre": [],
        "updates": 0,
        "micro": 0,
        "evals": [],
        "saves": [],
        "writes": [],
        "data_wait_s": 0.0,
        "gaps": [],
    }
    acc.register_save_state_pre_hook(functools.partial(pre_save, own))
    out = tempfile.mkdtemp()
    for _epoch in range(EPOCHS):
        model.train()
        batches = iter(train)
        while True:
            t = perf()
            try:
                x, y = next(batches)
            except StopIteration:
                break
            if own["micro"]:  # the first fetch starts the loader: before the first step
                own["data_wait_s"] += perf() - t
            with acc.accumulate(model):
                loss = torch.nn.functional.mse_loss(model(x), y)
                if own["micro"] % BATCHES == 0 and own["micro"]:  # after an evaluation
                    own["gaps"].append(perf() - own.pop("updated"))
                acc.backward(loss)
                if acc.sync_gradients:
                    own["updated"] = perf()  # before the update, in which the step ends
                opt.step()
                opt.zero_grad()
            own["micro"] += 1
            if acc.sync_gradients:
                own["updates"] += 1
                if own["updates"] % SAVE_EVERY == 0:
                    t = perf()
                    SPAN[:] = [float("inf"), float("-inf")]
                    acc.save_state(os.path.join(out, f"ckpt{own['updates']}"))
                    own["saves"].append(perf() - t)
                    own["writes"].append(SPAN[1] - SPAN[0])
                    SPAN.clear()
        t = perf()
        model.eval()
        with torch.no_grad():
            total = sum(float(torch.nn.functional.mse_loss(model(x), y)) for x, y in held)
        own["evals"].append(perf() - t)
    print(json.dumps(own), flush=True)
    print(f"held-out loss {total:.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
