"""A metric made before the update and formatted after it (in the next step), and a
function scripted with ``torch.jit.script`` every step (a factory and a ``.to`` inside):
prints its graphs, losses, log and what ``Tensor.to`` is as one JSON line, to compare a plain run with one under
perftop whose steps are often watched, and often primed (the step before a watched one)."""

import json
import types

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
device = "cpu"  # "cuda" on a GPU machine
STEPS = 60


def scale(x: torch.Tensor) -> torch.Tensor:
    z = torch.zeros(x.size(), dtype=x.dtype, device=x.device)
    return (z + x * 2).to(x.dtype)


model = torch.nn.Linear(8, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
X, Y = torch.randn(64, 8), torch.randint(0, 4, (64,))
graphs, losses, log, depths = set(), [], [], []
acc = None
for it in range(STEPS):
    fn = torch.jit.script(types.FunctionType(scale.__code__, globals(), f"scale{it}"))
    graphs.add(str(fn.graph))
    depths.append(torch._C._len_torch_function_stack())
    j = (it * 8) % 56
    xb, yb = X[j : j + 8].to(device), Y[j : j + 8].to(device)
    if acc is not None:
        log.append(f"{acc:.3f}")  # SITE acc
    out = model(fn(xb))
    loss = torch.nn.functional.cross_entropy(out, yb)
    acc = (out.argmax(1) == yb).float().mean()  # made in this step, read in the next
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(float(loss.detach()).hex())  # SITE loss
out = {"graphs": sorted(graphs), "losses": losses, "log": log, "depths": depths}
out["to"] = type(torch.Tensor.to).__name__  # torch's own again once the first step ended
print(json.dumps(out))
