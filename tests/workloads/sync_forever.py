"""Steps with a host-device sync point (``.item()``) that keep going until killed."""

import time

import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while True:
    opt.zero_grad()
    loss = model(torch.randn(2, 4)).sum()
    loss.backward()
    opt.step()
    if loss.item() > 1e9:  # a sync every step
        break
    time.sleep(0.01)
