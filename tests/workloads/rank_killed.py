"""DDP on CPU (gloo), 2 ranks: rank ``KILLED_RANK`` (default 1) kills itself with SIGKILL
after ``KILL_AT`` steps of ~20 ms (default 60: its hook has sent its steps by then), as
the kernel's OOM killer would; its launcher (torchrun) then stops the other rank. With
``OOM_CGROUP`` (a memory cgroup's folder, with a limit), it moves itself there as it starts
and, instead, takes memory until the kernel's OOM killer takes it. Each rank prints ``pid
RANK PID``."""

import os
import signal
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

KILLED = int(os.environ.get("KILLED_RANK", "1"))
KILL_AT = int(os.environ.get("KILL_AT", "60"))
CGROUP = os.environ.get("OOM_CGROUP")

dist.init_process_group("gloo")
rank = dist.get_rank()
os.write(1, f"pid {rank} {os.getpid()}\n".encode())  # one write: the ranks share stdout
torch.manual_seed(0)
model = DDP(torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10_000):
    if rank == KILLED and CGROUP and step == 0:  # placed in it as it starts (its memory
        with open(os.path.join(CGROUP, "cgroup.procs"), "w") as f:  # so far stays charged
            f.write(str(os.getpid()))  # where it was: v1 and v2 move no charge by default)
    if rank == KILLED and step == KILL_AT:
        if CGROUP:
            hog = [bytearray(16 * 2**20) for _ in range(256)]  # 4 GiB, each page written
        os.kill(os.getpid(), signal.SIGKILL)
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.02)
