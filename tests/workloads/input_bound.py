"""A CPU training fed by a slow dataset: ``input_bound.py STEPS WORKERS [COMPUTE_MS]``.

With 0 workers every batch is loaded in the training loop (starved: data wait dominates);
with 4 workers loading overlaps the step (the fix). Used to compare two recordings.
"""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
WORKERS = int(sys.argv[2]) if len(sys.argv) > 2 else 0
COMPUTE_S = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.004


class Slow(Dataset):
    def __len__(self):
        return STEPS * 4

    def __getitem__(self, i):
        time.sleep(0.004)  # 16 ms per batch of 4 when loaded in the loop
        return torch.randn(8), torch.randn(1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(Slow(), batch_size=4, num_workers=WORKERS):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(COMPUTE_S)  # the model's own compute
    print("trained", STEPS, "workers", WORKERS)
