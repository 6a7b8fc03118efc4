"""A light job with more DataLoader workers than this machine's cores (2 more: 4 on CI's 2), each
mostly idle: a small in-memory dataset, and a loop that sleeps 20 ms a step (its device's
compute, which the host waits for). Runs for SECONDS (argv[1], default 6), then prints its
own counters as JSON: steps and the loader's workers."""

import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 6.0
WORKERS = (os.cpu_count() or 2) + 2
torch.manual_seed(0)
data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
loader = DataLoader(data, batch_size=8, num_workers=WORKERS, persistent_workers=True)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps, end = 0, time.monotonic() + SECONDS
while time.monotonic() < end:
    for x, y in loader:
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        steps += 1
        time.sleep(0.02)
        if time.monotonic() >= end:
            break
print(json.dumps({"steps": steps, "workers": WORKERS}))
