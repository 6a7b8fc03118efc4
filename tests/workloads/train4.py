"""A small DDP job on CPU, as a user writes one. SLOW_RANK sleeps SLOW_S before backward
(a straggler); HANG_RANK sleeps HANG_S before the metric all_reduce at step HANG_AT."""

import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

STEPS = int(os.environ.get("STEPS", "200"))
SLOW_RANK = int(os.environ.get("SLOW_RANK", "-1"))
SLOW_S = float(os.environ.get("SLOW_S", "0.03"))
HANG_RANK = int(os.environ.get("HANG_RANK", "-1"))
HANG_AT = int(os.environ.get("HANG_AT", "40"))
HANG_S = float(os.environ.get("HANG_S", "60"))


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(
        torch.nn.Sequential(
            torch.nn.Linear(128, 256),
            torch.nn.ReLU(),
            torch.nn.Linear(256, 256),
            torch.nn.ReLU(),
            torch.nn.Linear(256, 10),
        )
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ds = TensorDataset(torch.randn(8192, 128), torch.randint(0, 10, (8192,)))
    loader = DataLoader(ds, batch_size=64, sampler=DistributedSampler(ds))
    step = 0
    while step < STEPS:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            if rank == SLOW_RANK:
                time.sleep(SLOW_S)
            loss.backward()
            opt.step()
            with torch.no_grad():
                acc = (model(x).argmax(1) == y).float().mean()
            if rank == HANG_RANK and step == HANG_AT:
                time.sleep(HANG_S)
            dist.all_reduce(acc)
            if step % 20 == 0 and rank == 0:
                print(f"step {step} loss {loss.item():.3f} acc {acc.item() / 4:.3f}", flush=True)
            step += 1
            time.sleep(0.02)  # a little I/O
            if step >= STEPS:
                break
    dist.destroy_process_group()


main()
