"""30 training steps, each reading its loss (``.item()``: a sync on a GPU), then a final
evaluation with no sync (its outputs stay tensors) and the exit: no step comes after it."""

import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 8), torch.randn(16, 1)
for _ in range(30):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    loss.item()
outs = []
with torch.no_grad():
    for _ in range(5):
        outs.append(model(x))
