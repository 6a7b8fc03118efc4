"""An optimizer and in-memory tensors, no DataLoader."""

import torch

model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters())
x, y = torch.randn(128, 16), torch.randn(128, 1)
for _ in range(20):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
print("no loader done")
