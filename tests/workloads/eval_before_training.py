"""An evaluation before the first training step, its batches fetched with grad on and run
under ``no_grad`` (MONAI's ``ValidationHandler(exec_at_start=True)``, an ignite
evaluator's shape), then 3 epochs of training. Prints its own counters as JSON: steps,
the evaluation's time and the first step's (from its batch's fetch to its update)."""

import json
import time

import torch
from core_wait import run_delay

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(320, 32), torch.randn(320, 1))
train = torch.utils.data.DataLoader(data, batch_size=32)
val = torch.utils.data.DataLoader(data, batch_size=64)
own = {"steps": 0}
t = time.perf_counter()
for x, _ in val:  # an evaluation before training (exec_at_start): fetched with grad on
    with torch.no_grad():
        model(x)
    time.sleep(0.02)
own["pre_eval_s"] = time.perf_counter() - t
q = run_delay()  # the step perftop sees may begin at the evaluation loader's end, here
for _epoch in range(3):
    t = time.perf_counter()
    for x, y in train:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if own["steps"] == 0:
            own["first_step_s"] = time.perf_counter() - t
            own["first_wait_s"] = run_delay() - q
        own["steps"] += 1
print(json.dumps(own))
