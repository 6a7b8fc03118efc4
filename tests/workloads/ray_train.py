"""A Ray Train job: ``TorchTrainer`` with 2 CPU workers (gloo), ``prepare_model`` (DDP) and
``prepare_data_loader``, 3 epochs of a small MLP, ``ray.train.report`` each epoch (the second's on rank 0 with a
checkpoint: the model's state saved to a folder, as Ray's guide does; rank 1 reports none);
a collate_fn that takes 2 ms a batch and times itself.

Its own counters, one JSON line on stdout at the end: per worker its pid, the rank and world
size Ray set in its environment, the thread its training function ran on, its steps (optimizer updates), each epoch's time, each
report's call (and the checkpoint's, from its torch.save to its report's return), each
batch's fetch and the collate calls and time within it, the all-reduces DDP made (buckets a
step, times steps), and the time its training function returned. ``python ray_train.py OUT_DIR``."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import ray
import torch
from ray.train import Checkpoint, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_data_loader, prepare_model
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, default_collate

EPOCHS = 3
SAMPLES = 192  # 96 a worker (DistributedSampler), 6 batches of 16: 6 steps an epoch
BATCH = 16


def train_fn(config: dict) -> None:
    ctx = ray.train.get_context()
    torch.manual_seed(0)
    model = prepare_model(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)))
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(
        torch.randn(SAMPLES, 32, generator=g), torch.randn(SAMPLES, 1, generator=g)
    )
    collated = [0.0, 0]  # the wall time inside this worker's collate_fn so far, its calls

    def collate(items: list) -> object:
        """A slow batch's assembly, timing itself: every fetch holds one call, so a step's
        data wait is at least the time its window spent here (a preemption is in both)."""
        c = time.perf_counter()
        batch = default_collate(items)
        time.sleep(0.002)
        collated[0] += time.perf_counter() - c
        collated[1] += 1
        return batch

    loader = prepare_data_loader(
        DataLoader(data, batch_size=BATCH, shuffle=True, collate_fn=collate)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps, epoch_s, step_s, report_s, fetch_s, carry = 0, [], [], [], [], 0.0
    call_s, ckpt_s = [], []
    collate_s, collates, c0, n0 = [], [], 0.0, 0  # c0, n0: collated at the last step's end
    for epoch in range(EPOCHS):
        if ray.train.get_context().get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        t0 = t = f = time.perf_counter()
        batches = iter(loader)  # (Ray's wrapper makes the DataLoader's iterator here)
        while True:  # ``for x, y in loader``, each batch's fetch timed: an epoch's first
            try:  # holds its iterator's start, and the last epoch's end (StopIteration)
                x, y = next(batches)
            except StopIteration:
                carry = time.perf_counter() - f
                break
            fetch_s.append(time.perf_counter() - f + carry)
            collate_s.append(collated[0] - c0)
            collates.append(collated[1] - n0)
            carry = 0.0
            # 1.2 s an epoch: Ray Train's controller takes each result out of a queue of
            # one every 2 s, and a report waits for it (docs/distributed.md#ray-train): the
            # last report's wait, after the last step, stays well short of a stall (2 s)
            time.sleep(0.2)
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            step_s.append(-t + (t := time.perf_counter()))
            f, (c0, n0) = time.perf_counter(), collated
        epoch_s.append(time.perf_counter() - t0)
        metrics = {"epoch": epoch, "steps": steps, "loss": loss.item()}
        if epoch == 1 and ctx.get_world_rank() == 0:
            with tempfile.TemporaryDirectory() as d:
                s = time.perf_counter()
                torch.save(model.state_dict(), os.path.join(d, "model.pt"))
                c = time.perf_counter()
                ray.train.report(metrics, checkpoint=Checkpoint.from_directory(d))
                call_s.append(time.perf_counter() - c)
                ckpt_s.append(time.perf_counter() - s)
        else:
            c = time.perf_counter()
            ray.train.report(metrics)
            call_s.append(time.perf_counter() - c)
        report_s.append(time.perf_counter() - t)
    own = {
        "pid": os.getpid(),
        "tid": threading.get_native_id(),  # Ray Train runs this function on a thread of its own
        "rank": ctx.get_world_rank(),
        "world_size": ctx.get_world_size(),
        "env_rank": os.environ.get("RANK"),
        "env_world_size": os.environ.get("WORLD_SIZE"),
        "steps": steps,
        "epoch_s": epoch_s,
        "step_s": step_s,  # each step's time, from the last one's end (an epoch's first: its start)
        "report_s": report_s,  # from each epoch's last step's end to its report's return
        "call_s": call_s,  # each ray.train.report call (a barrier of the workers)
        "ckpt_s": ckpt_s,  # rank 0's checkpoint: its torch.save to its report's return
        "fetch_s": fetch_s,  # each step's batch: next() of the prepared loader, and iter()
        "collate_s": collate_s,  # the time in collate_fn inside each step's fetch_s
        "collates": collates,  # and its calls
        # DDP's reducer: one all-reduce per bucket a step (this model's 4 tensors: 1 bucket)
        "buckets": len(model._get_ddp_logging_data().get("bucket_sizes", "1").split(", ")),
        "done_t": time.time(),
    }
    Path(config["out"], f"rank{own['rank']}.json").write_text(json.dumps(own))


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    trainer = TorchTrainer(
        train_fn,
        train_loop_config={"out": str(out)},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(storage_path=str(out / "results"), name="ray46"),
    )
    result = trainer.fit()
    workers = sorted(
        (json.loads(p.read_text()) for p in out.glob("rank*.json")), key=lambda w: w["rank"]
    )
    print(json.dumps({"error": repr(result.error), "workers": workers, "driver": os.getpid()}))
    ray.shutdown()


if __name__ == "__main__":
    main()
