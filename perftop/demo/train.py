"""The bundled demo training: small, CPU-only, and slow for reasons perftop can name.

Scenarios:
  input  a starved input pipeline: a costly per-sample transform in 2 DataLoader workers
  sync   sync-heavy loss code: boolean masks, nonzero, unique and .item() every step
  mixed  both at once (the default)
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler

CLASSES = 10
IGNORE = -1


class Shapes(Dataset):
    """Synthetic 32x32 images with per-pixel labels, made on the fly from the index."""

    def __init__(self, n: int, slow_transform: bool) -> None:
        self.n = n
        self.slow = slow_transform

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, 32, 32, generator=g)
        labels = torch.randint(0, CLASSES, (32, 32), generator=g)
        labels[torch.rand(32, 32, generator=g) < 0.2] = IGNORE
        if self.slow:
            img = augment(img)
        return img, labels


def augment(img: torch.Tensor) -> torch.Tensor:
    """A deliberately wasteful per-sample transform: pixel-wise Python arithmetic."""
    out = img.clone()
    flat = out.view(-1)
    for k in range(0, flat.numel(), 2):
        flat[k] = math.tanh(float(flat[k]) * 1.1)
    return out


class Forever(Sampler[int]):
    """Sample indices 0, 1, 2, ... without end: the demo runs until it is stopped."""

    def __iter__(self) -> Iterator[int]:
        return itertools.count()


class TinySeg(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, CLASSES, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def sync_heavy_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy the slow way: every line here makes a GPU wait for the host."""
    logits = logits.permute(0, 2, 3, 1).reshape(-1, CLASSES)
    labels = labels.reshape(-1)
    valid = labels != IGNORE
    logits = logits[valid]  # boolean mask: the output size depends on the data
    labels = labels[valid]
    present = torch.unique(labels)  # unique: its size depends on the data
    weights = torch.zeros(CLASSES, device=labels.device)
    weights[present] = 1.0
    rare = torch.nonzero(torch.bincount(labels, minlength=CLASSES) < 5)  # nonzero
    weights[rare] = 2.0
    return F.cross_entropy(logits, labels, weight=weights)


def plain_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels, ignore_index=IGNORE)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scenario", choices=("mixed", "input", "sync"), default="mixed")
    p.add_argument("--steps", type=int, default=None, help="default: until stopped")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    slow = args.scenario in ("mixed", "input")
    loss_fn = sync_heavy_loss if args.scenario in ("mixed", "sync") else plain_loss
    forever = args.steps is None
    data = Shapes((args.steps or 1) * args.batch_size, slow_transform=slow)
    sampler = Forever() if forever else None
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers, sampler=sampler)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = TinySeg().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t0 = time.time()
    step = -1
    try:
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 25 == 0:
                print(f"step {step:4d}  loss {loss.item():.3f}", flush=True)  # .item(): a sync
    except KeyboardInterrupt:  # `s` in perftop's quit prompt: a clean end, not a failure
        print(f"stopped: {step + 1} steps in {time.time() - t0:.1f}s", flush=True)
        return 0
    print(f"done: {step + 1} steps in {time.time() - t0:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
