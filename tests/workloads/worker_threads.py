"""Two DataLoader workers that say which threads their process has and how many batches
they made (``worker_threads.py BATCHES``): a job's own count, for the hook's reports."""

import json
import os
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

BATCHES = int(sys.argv[1]) if len(sys.argv) > 1 else 50


class Named(Dataset):
    def __len__(self):
        return BATCHES * 4

    def __getitem__(self, i):
        time.sleep(0.01)  # 40 ms a batch in each worker: a run of ~1 s
        names = ",".join(sorted(t.name for t in threading.enumerate()))
        return torch.randn(8), os.getpid(), names


if __name__ == "__main__":
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    made: dict[int, int] = {}
    seen: set[str] = set()
    for x, pids, names in DataLoader(Named(), batch_size=4, num_workers=2):
        made[int(pids[0])] = made.get(int(pids[0]), 0) + 1
        for n in names:
            seen.update(n.split(","))
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    print(json.dumps({"batches": made, "threads": sorted(seen)}))
