"""A training library whose model calls go through generic wrappers, as Keras 3's do on
the torch backend (``Layer.__call__(*args, **kwargs)`` under a decorator's
``error_handler(*args, **kwargs)``): its fit trains and evaluates each epoch. The library is
written into ``argv[1]/lib/site-packages`` (a real installed package to perftop) and
imported from there. Prints its own counts, and the evaluation's line, as JSON."""

import json
import sys
from pathlib import Path

SOURCE = """
import functools

import torch


def error_handler(fn):
    @functools.wraps(fn)
    def error_handler(*args, **kwargs):
        return fn(*args, **kwargs)

    return error_handler


class Layer:
    def __init__(self, module):
        self.module = module

    @error_handler
    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)


class Trainer:
    def __init__(self, module):
        self.layer = Layer(module)
        self.opt = torch.optim.SGD(module.parameters(), lr=0.01)
        self.steps = self.evals = 0

    def train_step(self, x, y):
        self.opt.zero_grad()
        torch.nn.functional.mse_loss(self.layer(x), y).backward()
        self.opt.step()
        self.steps += 1

    def test_step(self, x):
        with torch.no_grad():
            return self.layer(x)  # TEST_STEP_LINE

    def evaluate(self, xs):
        for x in xs:
            self.test_step(x)
        self.evals += 1

    def fit(self, batches, val, epochs):
        for _ in range(epochs):
            for x, y in batches:
                self.train_step(x, y)
            self.evaluate(val)
"""

site = Path(sys.argv[1]) / "lib" / "site-packages"
(site / "wrappedlib").mkdir(parents=True, exist_ok=True)
(site / "wrappedlib" / "__init__.py").write_text("")
(site / "wrappedlib" / "trainer.py").write_text(SOURCE)
sys.path.insert(0, str(site))

import torch  # noqa: E402
from wrappedlib.trainer import Trainer  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
batches = [(torch.randn(16, 16), torch.randn(16, 4)) for _ in range(10)]
val = [torch.randn(16, 16) for _ in range(40)]
t = Trainer(model)
t.fit(batches, val, 3)
line = SOURCE.splitlines().index(next(ln for ln in SOURCE.splitlines() if "TEST_STEP_LINE" in ln))
print(json.dumps({"steps": t.steps, "evals": t.evals, "test_step_line": line + 1}))
