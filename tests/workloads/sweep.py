"""A sweep: trials run one after another, each a training process of its own
(``sweep.py TRIALS STEPS``). Each trial prints its pid, its steps and its loop's time."""

import subprocess
import sys
import time

if len(sys.argv) > 3:  # a trial
    import torch

    steps, pause = int(sys.argv[2]), float(sys.argv[3])
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(pause)  # each trial's step takes its own time
    import os

    print(f"trial {os.getpid()} {steps} {time.perf_counter() - t0:.4f}", flush=True)
else:
    trials, steps = int(sys.argv[1]), int(sys.argv[2])
    for i in range(trials):
        pause = str(0.004 * (i + 1))
        subprocess.run([sys.executable, __file__, "trial", str(steps), pause], check=True)
