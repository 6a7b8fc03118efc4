"""A job with its own TorchFunctionMode whose ``with`` block holds the optimizer step
(where perftop starts and stops its detector). The job checks its own mode stack each
step and exits 3 if its mode is not on top inside the block, or left behind after it."""

import sys

import torch
from torch.overrides import TorchFunctionMode


class Counting(TorchFunctionMode):
    calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        Counting.calls += 1
        return func(*args, **(kwargs or {}))


def stack() -> list:
    return [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]


device = "cpu"
model = torch.nn.Linear(8, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 8).to(device), torch.randn(16, 1).to(device)
for _ in range(40):
    with Counting() as mine:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if stack()[-1] is not mine:
            sys.exit(3)
    if any(isinstance(m, Counting) for m in stack()):
        sys.exit(3)
    loss.item()  # SITE item
print("ok", Counting.calls > 0, file=sys.stderr)
