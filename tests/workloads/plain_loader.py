"""A plain training (no perftop) whose 2 DataLoader workers spend their time in a named
transform, `dilate`; runs until killed (or for argv[1] seconds). Prints "ready"."""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3600.0


def dilate(x):
    end = time.perf_counter() + 0.03
    while time.perf_counter() < end:  # busy: CPU-bound per-sample work
        x = x * 1.0001
    return x


class Data(Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        return dilate(torch.randn(8)), torch.randn(1)


if __name__ == "__main__":
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    end = time.monotonic() + SECONDS
    loader = DataLoader(Data(), batch_size=4, num_workers=2)
    print("ready", flush=True)
    for x, y in loader:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if time.monotonic() > end:
            break
