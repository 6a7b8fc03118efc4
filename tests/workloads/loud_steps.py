"""Steps around output that no terminal could keep up with: 10 steps, one line of 20 MB
of hex (incompressible), 10 steps, then lines as fast as it can for argv[1] seconds
(default 2), then "done". Exits 0."""

import os
import sys
import time

import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def steps(n: int) -> None:
    for _ in range(n):
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()


steps(10)
print(os.urandom(10_000_000).hex(), flush=True)
steps(10)
lines = ("flood " + "y" * 100 + "\n") * 1000
end = time.monotonic() + (float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
while time.monotonic() < end:
    sys.stdout.write(lines)
print("done", flush=True)
