"""A per-sample transform in the training process, as torchvision's ``Normalize`` is:
``torch.as_tensor(std, device=tensor.device)`` then ``bool((std == 0).any())`` on a host
tensor (no sync on any device: it follows the sample, which stays on the host), 8 times
a batch; beside it, one real site a step (SITE item)."""

import torch

device = "cpu"  # "cuda" on a GPU machine
MEAN, STD = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]


def normalize(t):
    mean = torch.as_tensor(MEAN, dtype=t.dtype, device=t.device)
    std = torch.as_tensor(STD, dtype=t.dtype, device=t.device)
    if (std == 0).any():
        raise ValueError("std evaluated to zero")
    return (t - mean[:, None, None]) / std[:, None, None]


class Images(torch.utils.data.Dataset):
    def __len__(self):
        return 8 * 30

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return normalize(torch.rand(3, 4, 4, generator=g)), i % 2


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 2)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total = 0.0
for x, y in torch.utils.data.DataLoader(Images(), batch_size=8):
    x, y = x.to(device), y.to(device)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.item()  # SITE item
print("done", total)
