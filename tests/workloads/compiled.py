"""A tiny compiled MLP trained for a few steps; prints dynamo's counters as one JSON line
(``COUNTERS {...}``) so a run under perftop can be compared with a plain run.
``--inductor`` compiles with inductor instead of the quicker ``aot_eager``; ``--fn``
compiles a function calling the model instead (no wrapper module; ``eager``, dynamo
alone), first called in the fourth step, after steps the sync detector watched."""

import json
import sys

import torch
import torch._dynamo.utils

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
fn = "--fn" in sys.argv
backend = "inductor" if "--inductor" in sys.argv else "eager" if fn else "aot_eager"
compiled = torch.compile((lambda t: model(t)) if fn else model, backend=backend)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for i in range(12):
    opt.zero_grad()
    out = model(x) if fn and i < 3 else compiled(x)
    loss = ((out - y) ** 2).mean()
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
