"""Many quick optimizer steps (argv[1], default 20000), then "steps N": enough records
to fill a small disk while the job itself writes nothing. argv[2]: seconds to sleep each
step (default 0), to spread the steps over more of the hook's batches."""

import sys
import time

import torch

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
PAUSE = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(N):
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    if PAUSE:
        time.sleep(PAUSE)
print("steps", N, flush=True)
