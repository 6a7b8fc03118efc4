"""Data that went to the device before the loop: a small data set kept on the device
(``.to(device)`` once), indexed with host indices each step; a meter sent to the device
before the loop, filled from the host and formatted every 5 steps. Both sites read device
data, however long ago it got there."""

import torch

device = "cpu"  # "cuda" on a GPU machine
STEPS = 30
torch.manual_seed(0)
X = torch.randn(256, 8).to(device)
Y = torch.randint(0, 4, (256,)).to(device)
meter = torch.zeros(()).to(device)
model = torch.nn.Linear(8, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
log = []
for it in range(STEPS):
    idx = torch.randint(0, 256, (16,))
    xb, yb = X[idx], Y[idx]
    classes = torch.unique(yb)  # SITE unique
    loss = torch.nn.functional.cross_entropy(model(xb), yb) + 0.0 * classes.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    meter.fill_(float(it))  # a host number in: the meter stays where it was sent
    if it % 5 == 0:
        log.append(f"{meter:.2f}")  # SITE meter
print("done", len(log))
