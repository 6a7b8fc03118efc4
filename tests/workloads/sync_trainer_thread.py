"""A trainer thread fed by the main thread: the main thread iterates a DataLoader into a
``queue.Queue``, a ``threading.Thread`` takes the batches and trains (backward, SGD), one
real site a step (SITE item). The main thread primes the queue before the trainer starts:
its batches close steps on the main thread before training is seen; the training thread is the trainer's, and its syncs are the ones to count."""

import queue
import threading

import torch
from torch.utils.data import DataLoader, TensorDataset

STEPS = 40
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(320, 16), torch.randn(320, 1)), batch_size=8)
q: queue.Queue = queue.Queue(maxsize=4)
total = [0.0]


def train():
    for _ in range(STEPS):
        x, y = q.get()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total[0] += loss.item()  # SITE item


trainer = threading.Thread(target=train)
for i, b in enumerate(loader):  # the main thread feeds (40 batches)
    q.put(b)
    if i == 3:  # the queue primed: training starts
        trainer.start()
trainer.join()
print("done", total[0])
