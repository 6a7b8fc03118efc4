"""A loop of two optimizers (a GAN's generator and critic, each after its own backward)
that marks its steps with ``perftop.step()`` and evaluates every 20 steps over the
training loader's first 4 batches, fetched with grad on and run under ``no_grad`` (ignite's
``evaluator.run(train_loader)``). Prints one JSON line: its steps, and each evaluation's
step and length by its own timer."""

import json
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

import perftop

torch.manual_seed(0)
torch.set_num_threads(1)
loader = DataLoader(TensorDataset(torch.randn(4096, 32)), batch_size=32, shuffle=True)
gen = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
critic = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt_c = torch.optim.SGD(critic.parameters(), lr=1e-3)
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-4)
own: dict = {"steps": 0, "evals": []}
for step, (x,) in enumerate(loader, 1):
    opt_c.zero_grad()
    loss_c = critic(gen(x).detach()).mean() - critic(x).mean()
    loss_c.backward()
    opt_c.step()
    opt_g.zero_grad()
    loss_g = -critic(gen(x)).mean()
    loss_g.backward()
    opt_g.step()
    perftop.step()
    own["steps"] += 1
    if step % 20 == 0:
        t = time.perf_counter()
        for _k, (xe,) in zip(range(4), loader):
            with torch.no_grad():
                score = critic(gen(xe))
            time.sleep(0.02)  # the evaluation's own work (a metric's)
        own["evals"].append([step, time.perf_counter() - t])
print(json.dumps(own))
