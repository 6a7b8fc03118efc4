"""A rollout-like pass every 10th step behind a generator that sleeps for each batch (20 ms;
16 ms for the one right after a pass): module calls with grad off, then the thread off the
CPU for a moment (a 1 ms sleep: a preemption on a busy host), then the pass's last line
reads its return (a sync, the pass's own). Prints ``passes N``. (At 5 and 4 ms, CI's busy
host preempted the thread before 3 of the 6 syncs for longer than the 3 ms between the two
sides: the time off the CPU on either side of a sync is what tells them apart.)

``rollout_tail_sync.py preempted``: the preemption real instead of the sleep, and longer
than the next batch, which then takes 8 ms, under half the feeder's usual wait (as on a busy
host, where preemptions stretch the usual wait to twice a feeder's sleep): a real-time process pinned to the training thread's core spins for
30 ms before each pass's sync, so the thread waits for its core (switched out, no block of
its own). Where a real-time priority is not allowed (no CAP_SYS_NICE), the rival runs at
the usual priority and the training thread at nice 19 (allowed to anyone: ~1.5% of the
core beside the rival), which switches it out as well. Then also prints JSON: each pass's
time off the CPU and voluntary switches from the rival's wake-up to the sync read, and
which of the two it was (``PERFTOP_TEST_NICE=1`` takes the second)."""

import json
import os
import resource
import subprocess
import sys
import threading
import time

import torch

PREEMPTED = sys.argv[1:] == ["preempted"]
SPIN = """
import os, sys, time
os.sched_setaffinity(0, {CORE})
try:
    if os.environ.get("PERFTOP_TEST_NICE") == "1":
        raise PermissionError
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    print("real-time", flush=True)
except OSError:
    print("nice", flush=True)
while sys.stdin.buffer.read(1):
    end = time.perf_counter() + 0.03
    while time.perf_counter() < end:
        pass
"""
rival = None
if PREEMPTED:
    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})  # this (the training) thread
    rival = subprocess.Popen([sys.executable, "-c", SPIN.replace("CORE", str(core))],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    how = rival.stdout.readline().strip()
    if how == "nice":  # this thread only (Linux: a nice value is a thread's)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def usage():
    return time.perf_counter(), time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD)


torch.set_num_threads(1)
torch.manual_seed(0)
device = torch.device("cpu")
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
model = model.to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
X, Y = torch.randn(8, 16).to(device), torch.randn(8, 1).to(device)
STEPS, EVERY = 60, 10
after_pass = [False]


AFTER_PASS_S = 0.008 if PREEMPTED else 0.016


def batches():
    while True:
        time.sleep(AFTER_PASS_S if after_pass[0] else 0.02)  # reading the next shard
        after_pass[0] = False
        yield X, Y


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
            if rival is None:
                time.sleep(0.001)
                ret = float(obs.sum())  # the pass's return: a sync
            else:
                t, c, ru = usage()
                rival.stdin.write("x")  # it wakes on this core: switched out till it ends
                rival.stdin.flush()
                spin = time.perf_counter() + 0.005  # on the CPU: at nice 19, a tick comes
                while time.perf_counter() < spin:  # and the rival takes the core
                    pass
                ret = float(obs.sum())
                t2, c2, ru2 = usage()
                windows.append({"off_cpu_s": (t2 - t) - (c2 - c),
                                "blocks": ru2.ru_nvcsw - ru.ru_nvcsw})  # fmt: skip
        after_pass[0] = True
        passes += 1
print("passes", passes)
if rival is not None:
    rival.stdin.close()
    rival.wait()
    print(json.dumps({"how": how, "windows": windows}))
