"""What timing the data wait behind a feeder costs a tight step, measured inside one
process under a real ``perftop run``: a loop fed from a list (no DataLoader, as
``get_batch()`` loops are), its 125 µs step, in blocks whose arm changes in random order
each round.

Arms (each against ``off``: no one-shot forward pre-hook at all, no timing):

- ``slot``: the pre-hook put at each step's end and taken at the first module call, and
  nothing else: what any such hook costs (torch's slow path for one module call);
- ``clock``: perftop's timing reading the thread's CPU clock at each step's end and first
  forward (the hook before the clock was left unread while no step waits);
- ``uncounted``: as installed, less the count of the thread's voluntary switches (read
  every 8th step end while the clock is unread; a wait with none in it was a preemption);
- ``perftop``: the timing as installed (the clock unread once no step waits).

    python benchmarks/feeder_timing.py [--rounds 40] [--steps 400]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hook_inprocess import _median_ci, run_job

JOB = r"""
import json, random, sys, time
import torch
import perftop.hook.feeder_wait as wait_mod
torch.manual_seed(0); torch.set_num_threads(1)
rounds, per = int(sys.argv[1]), int(sys.argv[2])
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batches = [torch.randn(2, 4) for _ in range(16)]
def steps(n):
    for i in range(n):
        x = batches[i % 16]
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
steps(2000)
import perftop.hook
st = perftop.hook.state()
arm = st.tracker.on_arm if st is not None else None
if arm is None:
    sys.exit("the hook did not arm its feeder timing: run under perftop run")
ff = arm.__self__
def slot_only():
    ff.slot.put(lambda module, args: ff.slot.take())
fast_after, usage = wait_mod.FAST_AFTER, wait_mod._usage
arms = {"off": None, "slot": slot_only, "clock": arm, "uncounted": arm, "perftop": arm}
res = {a: [] for a in arms}
shuffle = random.Random(0).shuffle
for r in range(rounds):
    order = list(arms)
    shuffle(order)
    for a in order:
        ff.disarm()
        ff.fast, ff.short = False, 0
        wait_mod.FAST_AFTER = 10**9 if a == "clock" else fast_after  # "clock": read each step
        wait_mod._usage = None if a == "uncounted" else usage
        st.tracker.on_arm = arms[a]
        steps(50)
        t0 = time.perf_counter()
        steps(per)
        res[a].append((time.perf_counter() - t0) / per)
st.tracker.on_arm, wait_mod.FAST_AFTER, wait_mod._usage = arm, fast_after, usage
print("RESULT", json.dumps(res))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--steps", type=int, default=400, help="timed steps per block")
    a = p.parse_args()
    res = run_job(JOB, str(a.rounds), str(a.steps))
    median_ci, base = _median_ci(), res["off"]
    print(f"one process under `perftop run`, {len(base)} rounds, arms in random order; the "
          "median over rounds of (arm - that round's off block), its 95% confidence interval")  # fmt: skip
    print(f"  off (no pre-hook, no timing): {statistics.median(base) * 1e6:7.2f} µs/step")
    for arm, got in res.items():
        if arm == "off":
            continue
        d = sorted((x - y) * 1e6 for x, y in zip(got, base, strict=True))
        lo, hi = median_ci(d)
        print(f"  {arm:<9} {statistics.median(d):+6.2f} µs/step, 95% CI [{lo:+6.2f} .. {hi:+6.2f}]")
    d = sorted((x - y) * 1e6 for x, y in zip(res["perftop"], res["uncounted"], strict=True))
    lo, hi = median_ci(d)
    print(f"  the switch count's own cost (perftop - uncounted, each round): "
          f"{statistics.median(d):+6.2f} µs/step, 95% CI [{lo:+6.2f} .. {hi:+6.2f}]")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
