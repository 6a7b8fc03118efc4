"""A loop that logs its loss every 10 iterations after the optimizer's step (the HF
Trainer's, TRL's, tianshou's): the last log comes after the last step; then 4 syncs after
the loop (a final parameters' print). Prints one JSON line: its steps, its logs, the lines."""

import json
import sys

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 16), torch.randn(256, 1)
own = {"steps": 0, "logs": 0, "line": sys._getframe().f_lineno + 8}
for i in range(1, 61):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    own["steps"] += 1
    if i % 10 == 0:
        own["logs"] += loss.item() > -1  # the log line's sync
own["final_line"] = sys._getframe().f_lineno + 1
own["final"] = [model.weight.sum().item() for _ in range(4)][0]  # after the loop: 4 syncs
print(json.dumps(own))
