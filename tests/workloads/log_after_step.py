"""A log line after the update that reads a parametrized weight (``weight_norm``: a module
call with grad on), then an evaluation under ``no_grad``, every 50 steps; the evaluations
timed by the loop itself. Prints one JSON line: its steps and each evaluation's time."""

import json
import time

import torch
from torch.nn.utils.parametrizations import weight_norm

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(
    weight_norm(torch.nn.Linear(64, 256)), torch.nn.ReLU(), torch.nn.Linear(256, 1)
)
act = torch.nn.Softplus()  # a module of no parameters, called with grad on in the log line
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
X, Y, XV = torch.randn(4096, 64), torch.randn(4096, 1), torch.randn(20000, 64)
own = {"steps": 0, "evals": [], "logged": []}
for i in range(200):
    idx = torch.randint(0, 4096, (64,))
    loss = torch.nn.functional.mse_loss(model(X[idx]), Y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    own["steps"] += 1
    if (i + 1) % 50 == 0:
        # the log line: module calls with grad on, after the update
        own["logged"].append(float(act(model[0].weight).norm()))
        t = time.perf_counter()
        with torch.no_grad():
            v = sum(model(XV[j : j + 2000]).sum() for j in range(0, 20000, 2000))
        own["evals"].append(time.perf_counter() - t)
        own["v"] = float(v)
print(json.dumps(own))
