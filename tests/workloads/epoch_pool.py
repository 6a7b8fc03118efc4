"""A loop fed by a process pool made anew each epoch (as Keras's ``PyDataset`` workers
are), beside a pool kept for the whole run, both of processes forked from the script (one
command line, one parent). Prints its own counts and the pools' pids as JSON."""

import json
import multiprocessing as mp
import os
import time

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
ctx = mp.get_context("fork")


def make(i: int) -> tuple[int, int]:
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:  # a CPU-bound decode (an epoch of 2 s: the probes,
        # a look a second, see each of its processes even on a loaded host)
        pass
    return i, os.getpid()


model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = ctx.Pool(2)
kept_pids, epoch_pids, steps = set(), set(), 0
for _epoch in range(3):
    with ctx.Pool(2) as pool:  # made anew each epoch
        for _i, pid in pool.imap(make, range(8)):
            epoch_pids.add(pid)
            x = torch.randn(16, 16)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), torch.randn(16, 4)).backward()
            opt.step()
            steps += 1
    kept_pids.update(pid for _i, pid in kept.map(make, range(2), chunksize=1))
kept.close()
kept.join()
print(json.dumps({"steps": steps, "kept": sorted(kept_pids), "epochs": sorted(epoch_pids)}))
