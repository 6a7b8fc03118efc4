"""rollout_tail_sync.py's loop with a real preemption: before each pass's last sync, a
real-time process pinned to the training thread's core spins for 30 ms, so the thread
waits for its core (switched out, no block of its own) longer than the feeder's next batch
then takes (16 ms, a sleep: a block). Prints ``passes N``, then JSON: each pass's time
off the CPU and voluntary switches from the competitor's wake-up to the sync read. Prints
``no real-time`` and exits 0 where a real-time priority is not allowed."""

import json
import os
import resource
import subprocess
import sys
import time

import torch

core = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {core})  # this (the training) thread
SPIN = f"""
import os, sys, time
os.sched_setaffinity(0, {{{core}}})
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
except OSError:
    print("no real-time", flush=True)
    sys.exit(0)
print("ready", flush=True)
while sys.stdin.buffer.read(1):
    end = time.perf_counter() + 0.03
    while time.perf_counter() < end:
        pass
"""
rival = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
word = rival.stdout.readline().strip()
if word != "ready":
    print(word or "no real-time")
    sys.exit(0)

torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
X, Y = torch.randn(8, 16), torch.randn(8, 1)
STEPS, EVERY = 60, 10
after_pass = [False]


def batches():
    while True:
        time.sleep(0.016 if after_pass[0] else 0.02)  # reading the next shard
        after_pass[0] = False
        yield X, Y


def usage():
    ru = resource.getrusage(resource.RUSAGE_THREAD)
    return time.perf_counter(), time.thread_time(), ru.ru_nvcsw


gen = batches()
passes, windows = 0, []
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
            t, c, n = usage()
            rival.stdin.write("x")  # the rival wakes on this core: switched out till it ends
            rival.stdin.flush()
            ret = float(obs.sum())  # the pass's return: a sync
            t2, c2, n2 = usage()
            windows.append({"off_cpu_s": (t2 - t) - (c2 - c), "blocks": n2 - n})
        after_pass[0] = True
        passes += 1
rival.stdin.close()
rival.wait()
print("passes", passes)
print(json.dumps(windows))
