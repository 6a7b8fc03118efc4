"""No optimizer object and no DataLoader: backward() then a hand-written SGD update."""

import torch

w = torch.zeros(16, requires_grad=True)
x = torch.randn(64, 16)
y = torch.randn(64)
for _ in range(15):
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
        w.grad.zero_()
print("manual sgd done")
