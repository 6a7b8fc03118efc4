"""A loop over a training DataLoader whose workers start anew each epoch (2 workers, not
persistent), with an evaluation over a validation loader of its own workers after each
epoch, as Lightning Fabric's examples and most hand-written loops do. The job times each
step's batch fetch and forward itself and prints them as JSON: ``steps`` (index, fetch,
forward seconds) and ``evals``. Each evaluation batch's score is read on the host
(``int()``: a sync between steps)."""

import json
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
epochs = int(sys.argv[1]) if sys.argv[1:] else 3
train = DataLoader(TensorDataset(torch.randn(640, 256), torch.randint(0, 10, (640,))),
                   batch_size=64, num_workers=2)  # fmt: skip
val = DataLoader(TensorDataset(torch.randn(256, 256), torch.randint(0, 10, (256,))),
                 batch_size=64, num_workers=2)  # fmt: skip
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.AdamW(model.parameters())
steps, evals, correct = [], 0, 0
clock = time.perf_counter
for _epoch in range(epochs):
    it = iter(train)
    while True:
        t = clock()
        try:
            x, y = next(it)
        except StopIteration:
            break
        fetched = clock()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        forward = clock() - fetched
        loss.backward()
        opt.step()
        opt.zero_grad()
        steps.append((len(steps), fetched - t, forward))
    with torch.no_grad():
        for x, y in val:
            correct += int((model(x).argmax(1) == y).sum())  # a sync a batch, between steps
    evals += 1
print(json.dumps({"steps": steps, "evals": evals}))
