"""DDP on CPU (gloo) for the collectives tests, for torchrun --nproc_per_node=2.

``MODE`` picks what goes wrong (several, comma-separated): ``slow`` (default): rank ``SLOW_RANK`` sleeps ``DELAY``
seconds before each backward, so the others wait for it at the gradient all-reduce;
``hang``: at step ``AT`` rank ``SLOW_RANK`` sleeps ``HANG_S`` seconds before a metric
all-reduce the others already wait in; ``desync``: at step ``AT`` (``AT + 2`` after a hang)
rank 0 all-reduces while the others broadcast, in a second process group, until gloo gives
up (``TIMEOUT`` s, default 3). Every step also all-reduces a metric and every 5th step logs after
a barrier (explicit collectives in the user's code). ``STEPS`` steps (default 20).

``ORACLE``: a path; each rank writes ``ORACLE.<rank>`` (JSON), its own arrival times on the
system clock (the flight recorder's) at each step's collectives: where its first layer's
gradients were ready (DDP's last bucket launches there), before the metric all-reduce and
before the barrier. The tests' measure of who waited how long, apart from perftop's.
"""

import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from gloo_exit import exit_cleanly  # beside this script
from torch.nn.parallel import DistributedDataParallel as DDP

MODE = set(os.environ.get("MODE", "slow").split(","))
SLOW = int(os.environ.get("SLOW_RANK", "1"))
STEPS = int(os.environ.get("STEPS", "20"))
DELAY = float(os.environ.get("DELAY", "0.05"))
AT = int(os.environ.get("AT", "8"))
HANG_S = float(os.environ.get("HANG_S", "15"))

dist.init_process_group("gloo")
# a desync never completes: in a group of its own, gloo gives up after TIMEOUT seconds
quick = dist.new_group(timeout=timedelta(seconds=float(os.environ.get("TIMEOUT", "3"))))
rank = dist.get_rank()
torch.manual_seed(0)
net = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)])
model = DDP(net, bucket_cap_mb=0.25)  # one bucket per layer: all-reduces overlap backward
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randn(64, 256)
ORACLE = os.environ.get("ORACLE")
own: dict[str, list[float]] = {"grads": [], "metric": [], "barrier": []}


def ready(_p: torch.Tensor) -> None:
    own["grads"][-1] = max(own["grads"][-1], time.time())


if ORACLE:
    for p in net[0].parameters():
        p.register_post_accumulate_grad_hook(ready)
for step in range(STEPS):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    if "slow" in MODE and rank == SLOW:
        time.sleep(DELAY)  # this rank's own work, before its backward
    own["grads"].append(0.0)
    loss.backward()
    opt.step()
    metric = loss.detach().clone()
    if "hang" in MODE and step == AT and rank == SLOW:
        time.sleep(HANG_S)  # the rank the others wait for
    if "desync" in MODE and step == AT + 2 * ("hang" in MODE) and rank != 0:
        dist.broadcast(metric, src=0, group=quick)  # rank 0 all-reduces here: a desync
    elif "desync" in MODE and step == AT + 2 * ("hang" in MODE):
        dist.all_reduce(metric, group=quick)
    else:
        own["metric"].append(time.time())
        dist.all_reduce(metric)  # the metric every rank logs
    if step % 5 == 4:
        own["barrier"].append(time.time())
        dist.barrier()
        if rank == 0:
            print("step", step, "loss", float(metric) / dist.get_world_size(), flush=True)
dist.destroy_process_group()
if ORACLE:
    with open(f"{ORACLE}.{rank}", "w") as f:
        json.dump(own, f)
print("rank", rank, "done", flush=True)
exit_cleanly()  # torch's gloo teardown race (gloo_exit.py)
