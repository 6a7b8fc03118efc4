"""pytorch-ignite's supervised trainer with an evaluator run on the training loader every
``EVERY`` iterations (an event handler) and on a validation loader at each epoch's end
(issue 44 item 4), and ignite's ``Checkpoint`` handler after each epoch's evaluation.
ignite's evaluator fetches its batches with grad on and runs its
forward in ``torch.no_grad()`` inside each iteration. The model sleeps in eval mode (wall
time, no CPU: an evaluation long enough to matter, cheap to run). Prints ignite's own
counters as JSON on its last line: the trainer's iterations, each evaluator run's time
(``time.perf_counter`` around ``evaluator.run``) in order, and the trainer's batch fetch
times (GET_BATCH_STARTED to GET_BATCH_COMPLETED), each checkpoint handler call's time
(it writes ``ckpt/`` in the working directory); then the same shapes by hand (below),
with their own counts and timers. argv: epochs, batches per epoch, every, seconds an
eval forward sleeps."""

import json
import sys
import time

import torch
from ignite.engine import Engine, Events, create_supervised_evaluator, create_supervised_trainer
from ignite.handlers import Checkpoint, DiskSaver
from ignite.metrics import Loss
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EPOCHS, BATCHES, EVERY = (int(a) for a in (sys.argv[1:4] if len(sys.argv) > 3 else (2, 8, 5)))
SLEEP = float(sys.argv[4]) if len(sys.argv) > 4 else 0.3
torch.manual_seed(0)
torch.set_num_threads(1)
x, y = torch.randn(BATCHES * 8, 16), torch.randint(0, 4, (BATCHES * 8,))
train_loader = DataLoader(TensorDataset(x, y), batch_size=8)
val_loader = DataLoader(TensorDataset(x[:16], y[:16]), batch_size=8)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 64), nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            time.sleep(SLEEP)
        return self.b(torch.relu(self.a(x)))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss = nn.CrossEntropyLoss()
trainer = create_supervised_trainer(model, opt, loss)
evaluator = create_supervised_evaluator(model, metrics={"loss": Loss(loss)})
own: dict = {"evals": [], "saves": [], "fetch_s": 0.0}


def timed(loader: DataLoader, what: str) -> None:
    t0 = time.perf_counter()
    evaluator.run(loader)
    own["evals"].append((what, trainer.state.iteration, time.perf_counter() - t0))


@trainer.on(Events.ITERATION_COMPLETED(every=EVERY))
def eval_on_train(engine: object) -> None:
    timed(train_loader, "train")


@trainer.on(Events.EPOCH_COMPLETED)
def eval_on_val(engine: object) -> None:
    timed(val_loader, "val")


# ignite's checkpoint handler after each epoch's evaluation: one torch.save of the model
# and the optimizer in one file (written to a temporary file, then renamed)
ckpt = Checkpoint(
    {"model": model, "optimizer": opt},
    DiskSaver("ckpt", require_empty=False),  # in the working directory
    n_saved=1,
)


@trainer.on(Events.EPOCH_COMPLETED)
def save(engine: Engine) -> None:
    t0 = time.perf_counter()
    ckpt(engine)
    own["saves"].append(time.perf_counter() - t0)


@trainer.on(Events.GET_BATCH_STARTED)
def fetch_started(engine: object) -> None:
    own["fetch_t0"] = time.perf_counter()


@trainer.on(Events.GET_BATCH_COMPLETED)
def fetch_done(engine: object) -> None:
    own["fetch_s"] += time.perf_counter() - own.pop("fetch_t0")


trainer.run(train_loader, max_epochs=EPOCHS)
own["iterations"] = trainer.state.iteration
own["loss"] = round(evaluator.state.metrics["loss"], 6)

# Then the same shapes by hand, over the same loader: a teacher's forward with grad off
# first in each step (the step's own work, not a pass), and after the 4th step an
# evaluation over the training loader's first 3 batches (grad on at each fetch, no_grad
# inside: one pass, left before the loader's end).
teacher = nn.Linear(16, 4)
own["hand_steps"] = 0
for i, (xb, yb) in enumerate(train_loader):
    with torch.no_grad():
        soft = teacher(xb)
    out = model(xb)
    opt.zero_grad()
    (loss(out, yb) + nn.functional.mse_loss(out, soft)).backward()
    opt.step()
    own["hand_steps"] += 1
    if i == 3:
        t0 = time.perf_counter()
        model.eval()
        for _, (ex, _ey) in zip(range(3), train_loader):
            with torch.no_grad():
                model(ex)
        model.train()
        own["evals"].append(("hand", i, time.perf_counter() - t0))
own["checksum"] = round(sum(float(p.sum()) for p in model.parameters()), 6)
print(json.dumps(own))
