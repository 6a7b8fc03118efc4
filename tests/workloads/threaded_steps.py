"""Training steps that only compute, on several torch threads (large enough matrices that
each op runs on all of them), for a given time. Prints its own figures as JSON: steps,
torch's thread count, the loop's wall time and the process's CPU time.
argv: seconds (default 4), then torch threads (default 2)."""

import json
import sys
import time

import torch

torch.manual_seed(0)
torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 512), torch.randn(256, 8)
steps = 0
t0, c0 = time.perf_counter(), time.process_time()
while time.perf_counter() - t0 < seconds:
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    steps += 1
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(
    json.dumps({"steps": steps, "threads": torch.get_num_threads(), "wall_s": wall, "cpu_s": cpu})
)
