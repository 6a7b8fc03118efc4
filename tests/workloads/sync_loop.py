"""A CPU training whose loss syncs every step (nonzero, a boolean mask, .item()), for
about 5 s so hints have time to settle."""

import time

import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 8), torch.randn(64, 4)
total = 0.0
end = time.time() + 5.0
while time.time() < end:
    err = (model(x) - y).pow(2)
    n = torch.nonzero(err > 0.5).shape[0]  # SITE nonzero
    loss = err[err > 0.1].mean() + 0.0 * n  # SITE mask
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.item()  # SITE item
print("done")
