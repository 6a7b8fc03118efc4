"""DDP on CPU (gloo), 2 ranks: rank ``KILLED_RANK`` (default 1) kills itself with SIGKILL
after ``KILL_AT`` steps of ~20 ms (default 60: its hook has sent its steps by then), as
the kernel's OOM killer would; its launcher (torchrun) then stops the other rank. Each rank
prints ``pid RANK PID`` first."""

import os
import signal
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

KILLED = int(os.environ.get("KILLED_RANK", "1"))
KILL_AT = int(os.environ.get("KILL_AT", "60"))

dist.init_process_group("gloo")
rank = dist.get_rank()
os.write(1, f"pid {rank} {os.getpid()}\n".encode())  # one write: the ranks share stdout
torch.manual_seed(0)
model = DDP(torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10_000):
    if rank == KILLED and step == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.02)
