"""A loop that makes its DataLoaders anew each epoch, as Keras's fit does: a training one
and an evaluation one of the same dataset class and batch size, the evaluation's iterated
with autograd on (its forward under no_grad inside the loop), so neither the settings nor
autograd at the first batch tell them apart. Prints its own counts as JSON."""

import json
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
epochs = int(sys.argv[1]) if sys.argv[1:] else 4
train = TensorDataset(torch.randn(160, 16), torch.randn(160, 4))
val = TensorDataset(torch.randn(64, 16), torch.randn(64, 4))
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = evals = val_batches = 0
for _epoch in range(epochs):
    for x, y in DataLoader(train, batch_size=16, shuffle=True):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        steps += 1
    for x, y in DataLoader(val, batch_size=16):
        with torch.no_grad():
            torch.nn.functional.mse_loss(model(x), y)
        val_batches += 1
    evals += 1
print(json.dumps({"steps": steps, "evals": evals, "val_batches": val_batches}))
