"""A fastai ``Learner`` fitting a small regression with fastai's own optimizer (its
``Adam``, no ``torch.optim`` class) and ``GradientAccumulation`` (an update every 4
batches of 32), validating each epoch; its own callback counts what fastai did, and reads
each validation batch's loss (``.item()``: fastai's losses wrap their inputs in its
``TensorBase``, views a function mode does not see made). Prints
them as JSON on the last line, with a hash of the final weights."""

import hashlib
import json
import sys

# fastai's optimizer module first: its import is the job's first of torch, so the hook
# arms while fastai.optimizer is still executing (its Optimizer not yet defined: fastai's
# steps went untimed, each micro-batch a step, until 5 Dec 2026)
from fastai.optimizer import Adam  # isort: skip
import torch
from fastai.basics import Callback, DataLoaders, Learner, MSELossFlat, set_seed
from fastai.callback.training import GradientAccumulation
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
set_seed(0, reproducible=True)


class Counts(Callback):
    order = 99
    own = {"train_batches": 0, "updates": 0, "cancelled": 0, "valid_batches": 0, "epochs": 0}

    def after_batch(self):
        self.own["train_batches" if self.training else "valid_batches"] += 1
        if not self.training:  # the validation loss, read on the host: a sync on a GPU
            self.own["val_loss_line"] = sys._getframe().f_lineno + 1
            self.own["val_loss"] = self.loss.item()

    def after_cancel_batch(self):  # GradientAccumulation's before_step: no update
        self.own["cancelled"] += self.training

    def after_epoch(self):
        self.own["epochs"] += 1


x = torch.randn(2048, 16)
y = x @ torch.randn(16, 1) + 0.1 * torch.randn(2048, 1)
train = DataLoader(TensorDataset(x[:1536], y[:1536]), batch_size=32, shuffle=True)
valid = DataLoader(TensorDataset(x[1536:], y[1536:]), batch_size=64)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
counts = Counts()
learn = Learner(
    DataLoaders(train, valid),
    model,
    loss_func=MSELossFlat(),
    opt_func=Adam,  # fastai's default, named
    cbs=[GradientAccumulation(n_acc=128), counts],
)
with learn.no_bar(), learn.no_logging():
    learn.fit(3, lr=1e-3)
own = dict(Counts.own, opt=type(learn.opt).__module__ + "." + type(learn.opt).__name__)
own["updates"] = own["train_batches"] - own["cancelled"]
state = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
own["weights"] = hashlib.sha256(state).hexdigest()[:16]
print(json.dumps(own))
