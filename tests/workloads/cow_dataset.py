"""A dataset held as a Python list of many small objects, read by DataLoader workers: each
read touches objects' reference counts, so the workers' private memory grows as pages they
share with the training process are copied (copy-on-write). argv: objects, seconds, batch size."""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class ListDataset(Dataset):
    def __init__(self, n: int) -> None:
        self.items = [(i, float(i), str(i)) for i in range(n)]  # many small Python objects

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> torch.Tensor:
        # a stride through the list: every read lands on other pages
        row = self.items[(i * 7919) % len(self.items)]
        return torch.tensor([row[1]])


if __name__ == "__main__":
    n, seconds = int(sys.argv[1]), float(sys.argv[2])
    ds = ListDataset(n)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    end = time.monotonic() + seconds
    steps = 0
    loader = DataLoader(ds, batch_size=int(sys.argv[3]), num_workers=2, shuffle=False)
    for x in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        steps += 1
        time.sleep(0.02)
        if time.monotonic() > end:
            break
    print(f"{steps} steps", flush=True)
