"""Steps that keep going until killed: for signal and monitor-death tests."""

import sys
import time

import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
print("ready", flush=True)
i = 0
try:
    while True:
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        time.sleep(0.01)
        i += 1
        if i % 50 == 0:
            print("step", i, flush=True)
except KeyboardInterrupt:
    print("interrupted at", i, flush=True)
    sys.exit(42)
