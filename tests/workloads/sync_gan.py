"""The DCGAN example's loop shape: the discriminator's backward() runs twice (real, then
fake) before its optimizer step, then the generator's; ``.item()`` reads the outputs once
an iteration each (``D_x``, ``D_G_z1``, ``D_G_z2``). argv: epochs."""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
netD = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())
netG = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 16))
optD = torch.optim.Adam(netD.parameters(), lr=2e-4)
optG = torch.optim.Adam(netG.parameters(), lr=2e-4)
crit = nn.BCELoss()
device = torch.device("cpu")  # "cuda" on a GPU box: the .item() calls below would sync
loader = DataLoader(TensorDataset(torch.randn(64 * 40, 16)), batch_size=64)
n = 0
for _epoch in range(int(sys.argv[1])):
    for (real,) in loader:
        netD.zero_grad()
        label = torch.full((64,), 1.0, device=device)
        output = netD(real.to(device)).view(-1)
        errD_real = crit(output, label)
        errD_real.backward()
        D_x = output.mean().item()  # D_x
        fake = netG(torch.randn(64, 4, device=device))
        label.fill_(0.0)
        output = netD(fake.detach()).view(-1)
        errD_fake = crit(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()  # D_G_z1: before the first optimizer step
        optD.step()
        netG.zero_grad()
        label.fill_(1.0)
        output = netD(fake).view(-1)
        errG = crit(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()  # D_G_z2
        optG.step()
        n += 1
print(f"iterations {n}", flush=True)
