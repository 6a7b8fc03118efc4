"""Sync sites as the ecosystem's programs make them (issue 45): a loop that logs on its
first iterations only (ignite's shape), a line that syncs every step, one library line
reached from two of the user's lines (skorch's ``net.py``), a library file in a
subpackage whose name it shares with its package's own ``__init__.py`` (ignite's
``engine/__init__.py``), a value moved to the host and then read there, and a host batch
kept beside its copy sent to the device (ignite's ``engine.state.batch``), and an
evaluation every 20 steps.

``python sync_ecosystem.py [STEPS]``; the library is written under ``./lib/site-packages``.
"""

import sys
import time
from pathlib import Path

import torch

SITE = Path.cwd() / "lib" / "site-packages"
(SITE / "ecolib" / "engine").mkdir(parents=True, exist_ok=True)
(SITE / "ecolib" / "__init__.py").write_text("")
(SITE / "ecolib" / "engine" / "__init__.py").write_text(
    "def record(t):\n    return t.item()  # the library's syncing line\n"
)
sys.path.insert(0, str(SITE))
from ecolib.engine import record  # noqa: E402

device = "cpu"  # "cuda" on a GPU machine
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 60
torch.manual_seed(0)
model = torch.nn.Linear(8, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
data = torch.utils.data.TensorDataset(torch.randn(STEPS * 16, 8), torch.randn(STEPS * 16, 4))
logged, total = [], 0.0
for it, batch in enumerate(torch.utils.data.DataLoader(data, batch_size=16)):
    x, y = (t.to(device) for t in batch)  # the loader's host batch is kept (ignite)
    loss = (model(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.item()  # SITE every
    if it < 4:  # a log on the first iterations only
        for _ in range(6):
            logged.append(f"{loss:.4f}")  # SITE first
    if it % 2:
        record(loss)  # SITE caller_a
    else:
        record(loss)  # SITE caller_b
    host = loss.cpu()  # SITE cpu
    total += host.item()  # on the host already: no wait on any device
    total += bool(host > 0)  # computed on the host from the host copy: no wait
    total += batch[0].mean().item()  # the host batch: no wait on any device
    if it % 20 == 19:  # an evaluation between steps, after steps 20, 40 and 60
        with torch.no_grad():
            model(x)
        time.sleep(0.3)
print("done", len(logged), round(total, 3))
