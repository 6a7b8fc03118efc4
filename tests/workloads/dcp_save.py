"""Two DDP ranks (gloo, CPU, torchrun) saving with torch.distributed.checkpoint (DCP: the
checkpoint of FSDP2 and torchtitan) every 10 of 40 steps, each rank timing its
``dcp.save`` calls. Each rank writes ``OUT/rank{R}.json``: its pid, rank, steps and the
saves' times (``save_s``)."""

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1))
model.register_buffer("table", torch.randn(2_000_000))  # 8 MB: a file's worth to write
ddp = nn.parallel.DistributedDataParallel(model)
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
out = Path(sys.argv[1])
own = {"pid": os.getpid(), "rank": rank, "steps": 0, "save_s": []}
for _step in range(40):
    x = torch.randn(32, 256)
    loss = ddp(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    own["steps"] += 1
    if own["steps"] % 10 == 0:
        t = time.perf_counter()
        dcp.save(
            {"model": model.state_dict(), "opt": opt.state_dict()},
            checkpoint_id=str(out / f"ckpt{own['steps']}"),
        )
        own["save_s"].append(time.perf_counter() - t)
(out / f"rank{rank}.json").write_text(json.dumps(own))
dist.destroy_process_group()
