"""A training loader whose 2 persistent workers are too slow, and an evaluation loader
with 2 persistent workers of its own that idle between evaluations: started after the
training loader, it stays the latest started (``two_loaders.py EPOCHS``)."""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.sleep_s)  # 40 ms a training batch in each worker
        return torch.randn(16), torch.randn(1)


if __name__ == "__main__":
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    train = DataLoader(Samples(320, 0.005), batch_size=8, num_workers=2, persistent_workers=True)
    val = DataLoader(Samples(64, 0.0), batch_size=8, num_workers=2, persistent_workers=True)
    for _ in range(epochs):
        for x, y in train:
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            for x, _y in val:
                model(x)
    print("trained", epochs * len(train))
