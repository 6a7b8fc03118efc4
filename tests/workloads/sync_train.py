"""A CPU training loop whose loss has four sync sites (each marked SITE, once per step).

``--clean`` runs the same loop without any of them. ``--helpers`` moves two of them into
a helper module. Adam's own step counter must never show up as a site.
"""

import sys

import torch

clean = "--clean" in sys.argv
helpers = "--helpers" in sys.argv
steps = 20
torch.manual_seed(0)
model = torch.nn.Linear(8, 4)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
device = "cpu"  # "cuda" on a GPU machine: the sites below are on the device's tensors
x = torch.randn(32, 8).to(device)
y = torch.randn(32, 4).to(device)
if helpers:
    import sync_helpers


def loss_fn(out):
    err = (out - y).pow(2)
    if clean:
        return err.mean()
    if helpers:
        n = sync_helpers.positive_count(err - 0.5)
        sel = sync_helpers.picked(err, err > 0.1)
    else:
        n = torch.nonzero(err > 0.5).shape[0]  # SITE nonzero
        sel = err[err > 0.1]  # SITE mask
    u = torch.unique(y.sign())  # SITE unique
    return sel.mean() + 0.0 * n + 0.0 * u.sum()


total = 0.0
for _ in range(steps):
    opt.zero_grad()
    loss = loss_fn(model(x))
    loss.backward()
    opt.step()
    if not clean:
        total += loss.item()  # SITE item
print("done", total)
# A plain run ends with no function mode on torch's stack: perftop leaves none of the
# job's and at most its own one, watching a next step that never came (the sampler's
# draws are random per session: the last step closed may have drawn the next).
C = torch._C
stack = [C._get_function_stack_at(i) for i in range(C._len_torch_function_stack())]
ours = [m for m in stack if getattr(type(m), "_perftop_sync_mode", False) is True]
depth = len(stack) - len(ours) + max(0, len(ours) - 1)
print("function-mode stack depth at the end:", depth)
sys.exit(0 if depth == 0 else 3)
