"""DistributedDataParallel on CPU (gloo), for torchrun --nproc_per_node=2."""

import torch
import torch.distributed as dist
from gloo_exit import exit_cleanly  # beside this script
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
exit_cleanly()  # torch's gloo teardown race (gloo_exit.py)
