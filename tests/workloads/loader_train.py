"""A CPU training whose 2 DataLoader workers are the bottleneck: a slow __getitem__."""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 12


class Slow(Dataset):
    def __len__(self):
        return STEPS * 4

    def __getitem__(self, i):
        time.sleep(0.01)  # 40 ms of work per batch per worker, ~20 ms/batch with 2 workers
        return torch.randn(8), torch.randn(1)


if __name__ == "__main__":
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(Slow(), batch_size=4, num_workers=2):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("trained", STEPS)
