"""Gradient accumulation over 4 micro-batches, one ``.item()`` in each (the HF Trainer's
shape): 4 syncs a step. The first optimizer step comes after the tracker has held the
first micro-batches as steps of their own, then folded them into step 0."""

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randn(8, 1)
ACCUM, STEPS = 4, 30
for _step in range(STEPS):
    for _micro in range(ACCUM):
        loss = torch.nn.functional.mse_loss(model(x), y) / ACCUM
        loss.backward()
        loss.item()  # sync: once a micro-batch
    opt.step()
    opt.zero_grad()
print("steps", STEPS)
