"""What a model's modules see of torch's global module hooks during evaluations between
steps, and that the evaluations and steps are what the loop made: an inner module records
how many global forward hooks torch holds when it runs (plain: none), and one evaluation
forward raises inside (caught by the loop) each epoch."""

import json
import sys

import torch
from torch.nn.modules import module as M

seen: list[int] = []


class Probe(torch.nn.Module):
    def forward(self, x):
        seen.append(len(M._global_forward_pre_hooks) + len(M._global_forward_hooks))
        return x


class Boom(torch.nn.Module):
    def forward(self, x):
        raise ValueError("boom")


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), Probe(), torch.nn.ReLU(), torch.nn.Linear(8, 1))
broken = torch.nn.Sequential(Probe(), Boom())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 8)
own = {"steps": 0, "evals": 0, "errors": 0}
for _epoch in range(int(sys.argv[1])):
    for _ in range(10):
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
        own["steps"] += 1
    with torch.no_grad():
        for _ in range(5):
            model(x)
        try:
            broken(x)
        except ValueError:
            own["errors"] += 1
        model(x)
    own["evals"] += 1
own["hooks_seen_inside"] = sorted(set(seen))
own["probes"] = len(seen)
own["hooks_after"] = len(M._global_forward_pre_hooks) + len(M._global_forward_hooks)
own["module_hooks_after"] = sum(
    len(m._forward_hooks) for m in (*model.modules(), *broken.modules())
)
own["checksum"] = float(sum(p.detach().double().sum() for p in model.parameters()))
print(json.dumps(own))
