"""A loop that logs its loss every 10 iterations after the optimizer's step (the HF
Trainer's, TRL's, tianshou's): the last log comes after the last step. Prints one JSON
line: its steps, its logs and the log's line."""

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
print(json.dumps(own))
