"""Hogwild: ``torch.multiprocessing`` starts trainers (no torchrun, no ranks) that train one
shared model; each prints the steps it took. argv: trainers, steps per trainer."""

import sys
from typing import Any

import torch
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(index: int, model: nn.Module, steps: int, start: Any) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(index)
    ds = TensorDataset(torch.randn(steps * 8, 16), torch.randn(steps * 8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    done = 0
    batches = iter(DataLoader(ds, batch_size=8, num_workers=1))
    start.wait()  # they train together: none is done before another begins
    for x, y in batches:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        done += 1
    print(f"trainer {index}: {done} steps", flush=True)


if __name__ == "__main__":
    n, steps = int(sys.argv[1]), int(sys.argv[2])
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    model.share_memory()
    start = mp.Barrier(n)
    procs = [mp.Process(target=train, args=(i, model, steps, start)) for i in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sys.exit(max(p.exitcode or 0 for p in procs))
