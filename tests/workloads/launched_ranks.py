"""Two DDP ranks (gloo, CPU) whose launcher puts no rank in their environment.

``launched_ranks.py spawn OUT``: ``torch.multiprocessing.spawn`` as in PyTorch's DDP
tutorial, the rank passed to ``init_process_group``. ``launched_ranks.py fabric OUT``:
Lightning Fabric's ``launch()``: the process started is rank 0, rank 1 its child with only
``LOCAL_RANK`` and ``WORLD_SIZE`` set; every ``SAVE_EVERY`` steps it saves a checkpoint
with ``fabric.save`` (rank 0 writes the file, then every rank waits at its barrier), each
call timed by the rank. Each rank writes its own counters to ``OUT/rank{R}.json``: its
pid, its rank and world size as ``torch.distributed`` says, its ``RANK`` variable (unset),
its optimizer steps and its ``fabric.save`` calls' times (``save_s``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

STEPS = 400  # about half a second or more: the hook looks for the group 4 times a second
SAVE_EVERY = 100


def train(rank: int, out: Path, fabric: Any = None) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model: Any = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    opt: Any = torch.optim.SGD(model.parameters(), lr=0.01)
    if fabric is None:
        model = nn.parallel.DistributedDataParallel(model)
    else:
        model, opt = fabric.setup(model, opt)
    steps, save_s = 0, []
    for _ in range(STEPS):
        x = torch.randn(16, 32)
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        if fabric is None:
            loss.backward()
        else:
            fabric.backward(loss)
        opt.step()
        steps += 1
        if fabric is not None and steps % SAVE_EVERY == 0:
            t = time.perf_counter()
            fabric.save(out / "ckpt.pt", {"model": model, "opt": opt, "steps": steps})
            save_s.append(time.perf_counter() - t)
    own = {"pid": os.getpid(), "rank": dist.get_rank(), "world_size": dist.get_world_size(),
           "env_rank": os.environ.get("RANK"), "steps": steps, "save_s": save_s}  # fmt: skip
    (out / f"rank{rank}.json").write_text(json.dumps(own))


def spawned(rank: int, world: int, out: str) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    train(rank, Path(out))
    dist.destroy_process_group()


def main() -> None:
    how, out = sys.argv[1], sys.argv[2]
    Path(out).mkdir(parents=True, exist_ok=True)
    if how == "spawn":
        os.environ["MASTER_PORT"] = sys.argv[3]
        torch.multiprocessing.spawn(spawned, args=(2, out), nprocs=2)
    else:
        from lightning.fabric import Fabric

        fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
        fabric.launch()
        train(fabric.global_rank, Path(out), fabric)


if __name__ == "__main__":
    main()
