"""TRL's GRPO shape: each training step generates with grad off (forward calls under
``no_grad``, after the step's batch and before its loss), and each evaluation generates
at the same call site over its own DataLoader. Prints its own counters as JSON: steps,
evaluations and their times, and the line of the generating forward call."""

import json
import sys
import time

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(256, 16))
train = torch.utils.data.DataLoader(data, batch_size=16)
val = torch.utils.data.DataLoader(data, batch_size=64)
own = {"steps": 0, "evals": [], "generate_line": 0}


def generate(x):
    with torch.no_grad():
        for _ in range(4):
            own["generate_line"] = sys._getframe().f_lineno + 1
            x = model(x)
    return x


for _epoch in range(3):
    for (x,) in train:
        target = generate(x)
        loss = ((model(x) - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        own["steps"] += 1
    t = time.perf_counter()
    for (x,) in val:
        generate(x)
        time.sleep(0.005)  # the reward's own work
    own["evals"].append(time.perf_counter() - t)
for (x,) in train:  # the last evaluation ends at training, not at the exit
    loss = (model(x) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    own["steps"] += 1
print(json.dumps(own))
