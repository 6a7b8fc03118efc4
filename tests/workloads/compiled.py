"""A tiny compiled MLP trained for a few steps; prints dynamo's counters as one JSON line
(``COUNTERS {...}``) so a run under perftop can be compared with a plain run.
``--inductor`` compiles with inductor instead of the quicker ``aot_eager``."""

import json
import sys

import torch
import torch._dynamo.utils

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
compiled = torch.compile(model, backend="inductor" if "--inductor" in sys.argv else "aot_eager")
x, y = torch.randn(32, 8), torch.randn(32, 1)
for _ in range(12):
    opt.zero_grad()
    loss = ((compiled(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    last = loss.item()
c = torch._dynamo.utils.counters
print(
    "COUNTERS",
    json.dumps(
        {
            "unique_graphs": c["stats"]["unique_graphs"],
            "calls_captured": c["stats"]["calls_captured"],
            "frames": c["frames"]["total"],
            "graph_breaks": sum(c["graph_break"].values()),
        }
    ),
)
