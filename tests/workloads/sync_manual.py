"""No torch.optim: backward(), then a hand-written update of the parameters, as the
regression and small-layer examples of a well-known repository do. ``--data`` updates
``p.data`` in place; by default ``p.add_`` runs under ``torch.no_grad()``.

The job prints the depth of torch's function-mode stack at the end of each step (JSON,
one line: ``depths``) and exits 3 if it is not 0 at its end, as in a plain run: perftop's
detector must never stay in the job.
"""

import json
import sys

import torch

STEPS = 40
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
x, y = torch.randn(32, 8), torch.randn(32, 1)
lr = 0.01
depths = []
for _ in range(STEPS):
    loss = ((model(x) - y) ** 2).mean()
    model.zero_grad()
    loss.backward()
    if "--data" in sys.argv:
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    else:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-lr)
    last = loss.item()  # SITE item
    depths.append(torch._C._len_torch_function_stack())
end = torch._C._len_torch_function_stack()
print(json.dumps({"depths": depths, "end": end}))
sys.exit(0 if end == 0 else 3)
