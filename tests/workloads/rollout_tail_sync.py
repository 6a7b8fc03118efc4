"""A rollout-like pass every 10th step behind a generator that sleeps for each batch (20 ms;
16 ms for the one right after a pass): module calls with grad off, then the thread off the
CPU for a moment (a 1 ms sleep: a preemption on a busy host), then the pass's last line
reads its return (a sync, the pass's own). Prints ``passes N``. (At 5 and 4 ms, CI's busy
host preempted the thread before 3 of the 6 syncs for longer than the 3 ms between the two
sides: the time off the CPU on either side of a sync is what tells them apart.)"""

import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
device = torch.device("cpu")
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
model = model.to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
X, Y = torch.randn(8, 16).to(device), torch.randn(8, 1).to(device)
STEPS, EVERY = 60, 10
after_pass = [False]


def batches():
    while True:
        time.sleep(0.016 if after_pass[0] else 0.02)  # reading the next shard
        after_pass[0] = False
        yield X, Y


gen = batches()
passes = 0
for i in range(STEPS):
    x, y = next(gen)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    if i % EVERY == EVERY - 1:
        with torch.no_grad():
            obs = X[:1]
            for _ in range(5):
                obs = model[0](obs)
            time.sleep(0.001)
            ret = float(obs.sum())  # the pass's return: a sync
        after_pass[0] = True
        passes += 1
print("passes", passes)
