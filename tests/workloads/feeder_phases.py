"""A tight loop fed by a generator that keeps up for FAST steps, then waits WAIT_S before
each of its last SLOW batches (``feeder_phases.py FAST SLOW WAIT_S``). Prints one JSON line:
each phase's own wait in next() (and the first slow batch's), the slow phase's time off the
CPU from each step's end to the next forward (its wait, and a busy host's preemptions
there, which perftop's measure holds too) and, where the hook runs,
whether it had stopped reading the CPU clock by the end of the first phase (its steps did
not wait) and the most CPU time it had seen a step spend before its forward."""

import json
import sys
import time

import torch

fast, slow, wait_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])


def batches():
    x = torch.randn(2, 8)
    for i in range(fast + slow):
        if i >= fast:
            time.sleep(wait_s)  # an empty queue: the loop waits for this batch
        yield x


torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
own = {
    "fast_wait_s": 0.0,
    "slow_wait_s": 0.0,
    "slow_off_cpu_s": 0.0,
    "fast_off_cpu_s": 0.0,
    "clock_off": None,
    "first_slow_wait_s": 0.0,
    "first_slow_cpu_s": 0.0,
    "cpu_hi": None,
}
ff = None
if "perftop.hook" in sys.modules:  # under perftop: its feeder timing, read (never changed)
    state = sys.modules["perftop.hook"].state()
    ff = getattr(state.tracker.on_arm, "__self__", None) if state is not None else None
off = 0
it = batches()
t0, c0 = time.perf_counter(), time.thread_time()
end, cend = t0, c0  # the last step's end: wall, thread CPU
for i in range(fast + slow):
    t = time.perf_counter()
    x = next(it)
    own["slow_wait_s" if i >= fast else "fast_wait_s"] += time.perf_counter() - t
    if i == fast:
        own["first_slow_wait_s"] = time.perf_counter() - t
    opt.zero_grad()
    if i >= fast:
        own["slow_off_cpu_s"] += (time.perf_counter() - end) - (time.thread_time() - cend)
    if i == fast:  # the first slow step's CPU there (the clock left unread: beyond cpu_hi, a wait)
        own["first_slow_cpu_s"] = time.thread_time() - cend
    model(x).sum().backward()
    opt.step()
    end, cend = time.perf_counter(), time.thread_time()
    if 50 <= i < fast:  # steps of the first phase the hook did not read the clock for
        off += getattr(ff, "fast", False) is True
    if i == fast - 1:  # the first phase's time off the CPU, all of it (a busy host's too)
        own["fast_off_cpu_s"] = (time.perf_counter() - t0) - (time.thread_time() - c0)
        # the most CPU a step's own work before its forward took (the clock left unread:
        # a longer time there is booked as a wait beyond it)
        own["cpu_hi"] = getattr(ff, "cpu_hi", None)
own["clock_off"] = off / (fast - 50) if ff is not None and hasattr(ff, "fast") else None
print(json.dumps(own))
