"""Sync shapes a GPU run would not confirm, beside ones it would.

- A nanoGPT-style batch sampler: CPU index tensors from ``torch.randint`` index a numpy
  memmap (no sync on any device); the batch then goes ``.to(device)``.
- ``loss.item()`` once a step: a real sync on a GPU (SITE step_item).
- Every 10 steps, after the optimizer step, an evaluation pass over a DataLoader with grad
  disabled reads each batch's loss (SITE eval_item, EVAL_BATCHES per pass): between steps.
- A final evaluation after the last step (a test pass): its reads are between steps too,
  though no later step end comes to send them.

``python sync_shapes.py [WAIT_S]``: each evaluation batch first waits ``WAIT_S`` off the CPU
(a slow storage's read).
"""

import os
import sys
import tempfile
import time

import numpy as np
import torch

STEPS, EVERY, EVAL_BATCHES = 30, 10, 4
WAIT_S = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
device = "cpu"
torch.manual_seed(0)
path = os.path.join(tempfile.mkdtemp(), "train.bin")
np.arange(5000, dtype=np.uint16).tofile(path)
block, batch = 8, 6


def get_batch():
    data = np.memmap(path, dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - block - 1, (batch,))
    x = torch.stack([torch.from_numpy((data[i : i + block]).astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy((data[i + 1 : i + 1 + block]).astype(np.int64)) for i in ix])
    return x.to(device) % 100, y.to(device) % 100


model = torch.nn.Sequential(torch.nn.Embedding(100, 16), torch.nn.Linear(16, 100))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
held = torch.utils.data.TensorDataset(torch.randint(0, 100, (EVAL_BATCHES * 2, block)))
eval_loader = torch.utils.data.DataLoader(held, batch_size=2)


def evaluate():
    model.eval()
    total = 0.0
    with torch.no_grad():
        for (xb,) in eval_loader:
            time.sleep(WAIT_S)
            xb = xb.to(device)
            total += model(xb).logsumexp(-1).mean().item()  # SITE eval_item
    model.train()
    return total


total = 0.0
for it in range(STEPS):
    x, y = get_batch()
    loss = torch.nn.functional.cross_entropy(model(x).view(-1, 100), y.view(-1))
    opt.zero_grad()
    loss.backward()
    total += loss.item()  # SITE step_item
    opt.step()
    if it % EVERY == 0:
        evaluate()
evaluate()  # the final test
print("done", total, file=sys.stderr)
