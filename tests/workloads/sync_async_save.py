"""A loop that reads its loss each step while its checkpoints are written on a thread of
their own (an async checkpoint, to a slow store: the file object sleeps 2 ms a write), so
that each save overlaps several steps. Prints its own counts as JSON: steps, saves, and
the loss reads made while a save was being written (``items_during``)."""

import io
import json
import threading
import time

import torch

STEPS, EVERY = 60, 15


class SlowStore(io.BytesIO):
    """A store that takes its time over each write (a network file system, a bucket)."""

    def write(self, b):  # type: ignore[override]
        time.sleep(0.002)
        return super().write(b)


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64), torch.randn(32, 1)
saving = threading.Event()
own = {"steps": 0, "saves": 0, "items_during": 0}
savers = []


def save(state: dict) -> None:
    saving.set()
    try:
        torch.save(state, SlowStore())
    finally:
        saving.clear()


for i in range(STEPS):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    last = loss.item()  # SITE item
    own["items_during"] += saving.is_set()
    own["steps"] += 1
    if i % EVERY == EVERY - 1 and not saving.is_set():
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        savers.append(threading.Thread(target=save, args=(state,)))
        savers[-1].start()
        own["saves"] += 1
    time.sleep(0.004)  # the step's own work
for t in savers:
    t.join()
print(json.dumps(own))
