"""60 short training steps, then 4 s of work after training (an upload, a last wait) on
the same thread, no step in it, and an exit with code 0."""

import time

import torch

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(60):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.01)
print("training done; uploading", flush=True)
time.sleep(4.0)  # the upload
print("bye")
