"""Training steps that only compute (one torch thread, no data loading, no I/O), for a
given time: on a host whose cores other processes hold, the time its main thread is not on
the CPU is time it waited for a core. Prints its own figures as JSON: steps, the loop's
wall time and its thread's CPU time (perf_counter and thread_time around the loop).
argv: seconds (default 4), then the one core to run on (default or ``any``: any), then a
number of helpers: processes of the job's own that spin (where it runs) while the loop
runs, as Ray's env runners or a tokenizer's server (the job's, not another user's), ended
before the job ends; their CPU time is printed too (their rusage)."""

import json
import os
import subprocess
import sys
import time

if len(sys.argv) > 2 and sys.argv[2] != "any":  # before torch's threads: they run there too
    os.sched_setaffinity(0, {int(sys.argv[2])})

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(128, 64), torch.randn(128, 8)
spin = [sys.executable, "-c", "while True: pass"]  # (the affinity is inherited)
helpers = [subprocess.Popen(spin) for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 0)]
steps = 0
t0, c0 = time.perf_counter(), time.thread_time()
while time.perf_counter() - t0 < seconds:
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    steps += 1
wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
own = {"steps": steps, "wall_s": wall, "cpu_s": cpu}
if helpers:
    own["helpers_cpu_s"] = 0.0
for helper in helpers:
    helper.kill()
    use = os.wait4(helper.pid, 0)[2]
    helper.returncode = -9  # reaped here (wait4): Popen's own wait would find none
    own["helpers_cpu_s"] += use.ru_utime + use.ru_stime
print(json.dumps(own))
