"""A single-threaded CPU training job (one torch thread, a DataLoader without workers) that
counts its own steps; with ``thread`` it starts a thread of its own halfway (``thread-first``:
before its first step, and it idles 1 s after its last), with ``hang:N`` it hangs 4 s in
``hang_here`` in its step N (from 0). Prints, as
JSON: its steps, the threads the kernel lists for it, the Python threads' names, and
whether glibc still counts the process single-threaded."""

import ctypes
import json
import os
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
steps, start_thread = int(sys.argv[1]), sys.argv[2:] == ["thread"]
first_thread = sys.argv[2:] == ["thread-first"]
hang = int(sys.argv[2][5:]) if sys.argv[2:3] and sys.argv[2].startswith("hang:") else -1


def hang_here():
    time.sleep(4.0)


model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(steps * 8, 16), torch.randn(steps * 8, 4))
done = 0
if first_thread:
    threading.Thread(target=time.sleep, args=(60,), daemon=True, name="job-own").start()
for i, (x, y) in enumerate(DataLoader(data, batch_size=8)):
    if start_thread and i == steps // 2:
        threading.Thread(target=time.sleep, args=(60,), daemon=True, name="job-own").start()
    if i == hang:
        hang_here()
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    done += 1
    time.sleep(0.002)  # ~0.5 s a 250 steps: the sender's due time comes several times
if first_thread:
    time.sleep(1.0)  # no exit yet: what was sent by now was sent while it trained
flag = ctypes.c_char.in_dll(ctypes.CDLL(None), "__libc_single_threaded").value
print(
    json.dumps(
        {
            "steps": done,
            "tasks": len(os.listdir("/proc/self/task")),
            "threads": sorted(t.name for t in threading.enumerate()),
            "single": flag != b"\x00",
        }
    )
)
