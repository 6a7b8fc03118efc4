"""Syncs in a pass whose batches are fetched with grad on, each forward under ``no_grad``
(HF's ``evaluation_loop``, mmengine's ``ValLoop``, ignite's evaluator): ``eval_grad_fetch.py
SHAPE``, SHAPE ``eval`` (an evaluation of 8 batches every 16 steps, an ``.item()`` each) or
``teacher`` (from step 20 on, past the steps watched for sure, each step's own ``no_grad``
forward of a teacher after its batch, with an ``.item()``, then the student's: the same
shape until training follows), or ``checkpoint`` (``eval`` with a ``torch.save`` before each
evaluation, as mmengine's last validation after its last checkpoint). Prints one JSON
line: the loop's own counts and the lines of its syncs."""

import json
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

SHAPE = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)
train = DataLoader(
    TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,))), batch_size=32
)
val = DataLoader(TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,))), batch_size=64)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
teacher = torch.nn.Linear(32, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
own = {"steps": 0, "evals": 0, "eval_syncs": 0, "teacher_syncs": 0, "lines": {}}
here = sys._getframe()
for step, (x, y) in enumerate(train, 1):
    if SHAPE == "teacher" and step >= 20:
        with torch.no_grad():
            soft = teacher(x).softmax(1)
            own["lines"]["teacher"] = here.f_lineno + 1
            own["teacher_syncs"] += soft.max().item() > 0  # the step's own sync
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    own["steps"] += 1
    if SHAPE in ("eval", "checkpoint") and step % 16 == 0:
        if SHAPE == "checkpoint":
            torch.save(model.state_dict(), sys.argv[2])
        own["evals"] += 1
        right = 0
        for vx, vy in val:  # fetched with grad on
            with torch.no_grad():
                own["lines"]["eval"] = here.f_lineno + 1
                right += (model(vx).argmax(1) == vy).sum().item()
            own["eval_syncs"] += 1
print(json.dumps(own))
