"""Epochs of short steps with an evaluation between them, each as long as argv says.
argv: steps per epoch, then one evaluation length in seconds per epoch ("2.5,2.5")."""

import sys
import time

import torch

steps, evals = int(sys.argv[1]), [float(x) for x in sys.argv[2].split(",")]
torch.manual_seed(0)
model = torch.nn.Linear(32, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 32), torch.randn(64, 1)
done = 0
for length in evals:
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        time.sleep(0.01)
        done += 1
    with torch.no_grad():  # the evaluation: its own time, between steps
        t0 = time.perf_counter()
        model(x)
        time.sleep(length)  # its work, off the CPU (a pass's time runs to its last forward)
        model(x)
        print(f"eval {time.perf_counter() - t0:.3f} s", flush=True)
print(f"{done} steps", flush=True)
