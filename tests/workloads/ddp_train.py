"""DistributedDataParallel on CPU (gloo), for torchrun --nproc_per_node=2."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
model = DDP(torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 16), torch.randn(32, 1)
for _ in range(10):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
rank = dist.get_rank()
dist.destroy_process_group()
print("rank", rank, "done", flush=True)
# torch 2.13's gloo ranks abort at interpreter exit now and then on a busy machine
# ("terminate called without an active exception": 5 in 12 plain torchrun runs beside a busy
# core, no perftop). The exit handlers run (perftop's last flush among them); the
# interpreter's teardown, where torch aborts, does not.
import atexit  # noqa: E402
import os  # noqa: E402

atexit._run_exitfuncs()
os._exit(0)
