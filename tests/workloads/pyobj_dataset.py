"""A dataset held as a list of Python objects, read by 2 workers: touching the objects'
reference counts copies the pages the workers share with the training process."""

import time

import torch
from torch.utils.data import DataLoader, Dataset

N = 3_000_000
CHUNK = 4000


class PyObjects(Dataset):
    def __init__(self):
        self.items = [(float(i), i) for i in range(N)]

    def __len__(self):
        return N // CHUNK

    def __getitem__(self, i):
        part = self.items[i * CHUNK : (i + 1) * CHUNK]
        return torch.tensor([sum(a for a, _ in part)])


if __name__ == "__main__":
    data = PyObjects()
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    loader = DataLoader(data, batch_size=2, num_workers=2, persistent_workers=True)
    end = time.time() + 8.0
    while time.time() < end:
        for x in loader:
            loss = model(x).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(0.01)
    print("done")
