"""A tight loop fed by a generator, on a core it shares with a spinning process of another
session: the host preempts the training thread again and again, some of it between a
step's end and its next forward, where a feeder's wait is timed. The generator builds
each batch on the CPU and sleeps 5 ms before every 50th (its one real wait). Prints its
own counts as JSON: steps, its sleeps' time off the CPU (wall less CPU, each around its
``time.sleep``: ``slept_s``, and each sleep's in ``sleeps``), and its time off the CPU from
before each update to after the next forward (a window that holds perftop's, from the step's
end to the forward's first module call), over the steps whose batch slept and over the
others; the wall time of the windows whose batch slept; and for each sleep the most CPU that
one of the windows since the previous sleep's took (``cpu_hi``)."""

import json
import os
import subprocess
import sys
import time

import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 800
SPIN = (
    "import os, time\nos.setsid()\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass"
)
torch.manual_seed(0)
torch.set_num_threads(1)
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # this thread, and what it starts
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
X, Y = torch.randn(256, 32), torch.randn(256, 1)
own = {"steps": 0, "slept_s": 0.0, "sleep_windows_off_s": 0.0, "sleep_windows_s": 0.0}
own["other_off_s"] = 0.0
own["sleeps"], own["cpu_hi"], hi = [], [], 0.0
spinner = None  # started after the first step (its imports), killed after the last
perf, cpu = time.perf_counter, time.thread_time


def off_since(w: float, c: float) -> float:
    return (perf() - w) - (cpu() - c)


def batches():
    for i in range(STEPS):
        if i % 50 == 25:
            w, c = perf(), cpu()
            time.sleep(0.005)
            own["sleeps"].append(off_since(w, c))
            own["slept_s"] += own["sleeps"][-1]
        j = i % 8 * 32
        yield (X[j : j + 32] * 2.0 + 1.0).clamp(-3, 3), Y[j : j + 32]


try:
    mark = None  # before the last update: wall, CPU and sleeps' time so far
    for xb, yb in batches():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        if mark is not None:  # off the CPU since then: with a sleep in it, or not
            w, c, slept = mark
            key = "sleep_windows_off_s" if own["slept_s"] > slept else "other_off_s"
            own[key] += off_since(w, c)
            if key == "sleep_windows_off_s":  # and its wall time, the CPU in it too
                own["sleep_windows_s"] += perf() - w
                own["cpu_hi"].append(hi)
                hi = 0.0
            else:
                hi = max(hi, cpu() - c)
        if spinner is None and own["steps"] == 1:  # inside a step: its wait has no fork in it
            spinner = subprocess.Popen([sys.executable, "-S", "-c", SPIN], stdin=subprocess.DEVNULL)
        loss.backward()
        mark = (perf(), cpu(), own["slept_s"])  # the window holds perftop's, end to forward
        opt.step()
        own["steps"] += 1
finally:
    if spinner is not None:
        spinner.kill()
        spinner.wait()
print(json.dumps(own))
