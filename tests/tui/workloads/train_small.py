"""A small CPU training with DataLoader workers, for the TUI's end-to-end test and the
bundled screenshot recording. ``--steps N`` (default 300), ``--workers W`` (default 2),
``--slow-every K`` makes every K-th batch slow to load (a visible stall)."""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Synthetic(Dataset):
    def __init__(self, n: int, slow_every: int) -> None:
        self.n, self.slow_every = n, slow_every

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.slow_every and i % (self.slow_every * 16) == 0 and i:
            time.sleep(0.15)
        x = torch.randn(64)
        return x, (x.sum() > 0).long()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--slow-every", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = DataLoader(Synthetic(a.steps * 16, a.slow_every), batch_size=16, num_workers=a.workers)
    for i, (x, y) in enumerate(data):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.01)
        if i % 25 == 0:
            print(f"step {i:>5}  loss {loss.item():.4f}", flush=True)
    print("training done", flush=True)


if __name__ == "__main__":
    main()
