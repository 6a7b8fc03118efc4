"""One rank on NCCL (one GPU: NCCL will not put two ranks of a group on one device): a
DDP model and a metric all-reduce per step, the job's own counts printed as RESULT.
``nccl_steps.py STEPS``. The job sets its own ring (``TORCH_FR_BUFFER_SIZE``: a world of
one is no job with ranks to perftop)."""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    init = "file://" + os.path.join(tempfile.mkdtemp(), "rendezvous")
    dist.init_process_group("nccl", init_method=init, rank=0, world_size=1)
    torch.cuda.set_device(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 1)).cuda(), device_ids=[0])  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    metrics = 0
    for _ in range(steps):
        x = torch.randn(256, 512, device="cuda")
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        metric = loss.detach().clone()
        dist.all_reduce(metric)  # the metric every rank logs
        metrics += 1
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print("RESULT " + json.dumps({"steps": steps, "metric_all_reduces": metrics}), flush=True)
