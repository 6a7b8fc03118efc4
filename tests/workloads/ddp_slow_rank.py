"""DDP on CPU (gloo) where one rank loads its data slowly: the others wait for it in the
gradient all-reduce. ``SLOW_RANK`` (default 1) picks it; ``STEPS`` (default 20). Each rank
prints its own backward times (``backward RANK s,s,...``): the others' wait in a step is
their backward less the slow rank's (which waits for no one)."""

import os
import time

import torch
import torch.distributed as dist
from gloo_exit import exit_cleanly  # beside this script
from torch.nn.parallel import DistributedDataParallel as DDP

SLOW = int(os.environ.get("SLOW_RANK", "1"))
STEPS = int(os.environ.get("STEPS", "20"))
DELAY = float(os.environ.get("SLOW_DELAY", "0.03"))

dist.init_process_group("gloo")
rank = dist.get_rank()


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8 * STEPS

    def __getitem__(self, i):
        if rank == SLOW and i % 8 == 0:
            time.sleep(DELAY)  # a slow transform on this rank only
        return torch.randn(16), torch.randn(1)


torch.manual_seed(rank)
model = DDP(torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
backward = []
for x, y in torch.utils.data.DataLoader(Data(), batch_size=8):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    t = time.perf_counter()
    loss.backward()
    backward.append(time.perf_counter() - t)
    opt.step()
dist.destroy_process_group()
times = ",".join(f"{b:.6f}" for b in backward)
os.write(1, f"backward {rank} {times}\n".encode())  # one write: the ranks share a pipe
print("rank", rank, "done", flush=True)
exit_cleanly()  # torch's gloo teardown race (gloo_exit.py)
