"""A compute-bound CPU training with its data in memory and no host-device syncs: runs
for about SECONDS (argv[1], default 5) so hints have time to settle."""

import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
torch.manual_seed(0)
data = TensorDataset(torch.randn(512, 256), torch.randn(512, 1))
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
end = time.time() + SECONDS
while time.time() < end:
    for x, y in DataLoader(data, batch_size=32):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
print("done")
