"""Trains STEPS steps, prints how many, then ends with ``os._exit(0)``: no exit handler
runs, perftop's last send included (``hard_exit.py STEPS``)."""

import os
import sys

import torch

steps = int(sys.argv[1])
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(steps):
    opt.zero_grad()
    model(torch.randn(8, 16)).pow(2).mean().backward()
    opt.step()
print("steps", steps, flush=True)
if len(sys.argv) < 3:
    os._exit(0)
