"""A loop whose GradScaler skips some updates (an overflow, as fp16 training has) and
counts its own iterations, updates and skips; with ``explicit``, it marks each
iteration's end with ``perftop.step()``."""

import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

import perftop

explicit = "explicit" in sys.argv[1:]
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu")
loader = DataLoader(TensorDataset(torch.randn(480, 16), torch.randn(480, 4)), batch_size=8)
iterations = updates = skipped = 0
for x, y in loader:
    iterations += 1
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    if iterations % 6 == 0:
        loss = loss * float("inf")  # inf gradients: the scaler skips this update
    scale = scaler.get_scale()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    if scaler.get_scale() < scale:
        skipped += 1
    else:
        updates += 1
    time.sleep(0.002)
    if explicit:
        perftop.step()
print(f"iterations {iterations} updates {updates} skipped {skipped}")
