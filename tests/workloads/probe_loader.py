"""A small CPU training fed by a 2-worker DataLoader, for the probe tests.

``busy``: each sample costs ~40 ms of pure-Python CPU in the worker (a slow transform), so
both workers run near 100% of a core while the trainer waits on data.
With a third argument, a folder, each busy worker writes there (file named by its pid) its own
CPU seconds and the wall seconds since it started, after each sample: the figure a probe's
CPU% must agree with, counted by the worker itself.
``cow``: the dataset is a big list of Python objects; each sample reads a slice of it, and
the refcount updates copy the parent's pages into the worker, so each worker's USS grows.
"""

import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

MODE = sys.argv[1] if len(sys.argv) > 1 else "busy"
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
OUT = sys.argv[3] if len(sys.argv) > 3 else None
_started = time.monotonic()


def _worker_start(_worker_id: int) -> None:
    global _started
    _started = time.monotonic()  # a forked worker's CPU clock starts at zero; so does this


def _account() -> None:
    if OUT is None:
        return
    path = os.path.join(OUT, str(os.getpid()))
    with open(path + ".tmp", "w") as f:
        json.dump({"cpu_s": time.process_time(), "wall_s": time.monotonic() - _started}, f)
    os.replace(path + ".tmp", path)


class Busy(Dataset):
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int):
        end = time.process_time() + 0.04
        x = 0
        while time.process_time() < end:
            x += 1
        _account()
        return torch.full((8,), float(i % 7)), torch.tensor(float(x % 3))


class Objects(Dataset):
    N = 1_500_000
    CHUNK = 30_000

    def __init__(self) -> None:
        self.data = [float(i) for i in range(self.N)]  # ~48 MB of float objects

    def __len__(self) -> int:
        return self.N // self.CHUNK

    def __getitem__(self, i: int):
        a = i * self.CHUNK
        part = self.data[a : a + self.CHUNK]  # increments every object's refcount: COW
        time.sleep(0.1)
        return torch.full((8,), part[0] % 5), torch.tensor(0.0)


def main() -> None:
    ds = Busy() if MODE == "busy" else Objects()
    loader = DataLoader(
        ds,
        batch_size=1,
        num_workers=2,
        shuffle=False,
        multiprocessing_context="fork",
        worker_init_fn=_worker_start,
    )
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    end = time.monotonic() + SECONDS
    for x, y in loader:
        loss = (model(x).squeeze(-1) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if time.monotonic() > end:
            break


if __name__ == "__main__":
    main()
