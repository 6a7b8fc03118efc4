"""What a pass between steps costs under perftop (an evaluation, a rollout: forward calls
with grad off), per forward call and per pass, against the plain job, in one run.

While a pass a forward with grad off opened is open, perftop watches for its end (the next
forward with grad on) with a global forward pre-hook, and times the pass's forward calls
with a global forward hook (first_forward.py, pass_meter.py): every module call in the pass
takes ``Module._call_impl``'s hooked path, torch's own cost of any global hook, and calls
perftop's hooks (a module inside a forward call is only counted). A step's own forward pays
that for its first module call only.

The job: a small MLP (6 modules a forward: Sequential, 3 Linear, 2 ReLU; one torch thread)
trained with SGD; after every 4th step a pass of 1 or of 8 forward calls with grad off
(alternately, at one site), each pass timed by the job. Per arm the fastest third of each
kind's passes (the least disturbed), then per forward call ``(t8 - t1) / 7`` and per pass
``t1 - per forward``. Arms: plain and ``perftop run --headless --no-record``,
interleaved (A B, then B A, ...); the median over rounds of each figure, of perftop's
less that round's plain run, with its 95% confidence interval, and the ratios.
``--with NAME:VAR=VALUE[,VAR=VALUE]`` adds an arm of ``perftop run`` with those settings.

    python benchmarks/pass_cost.py [--runs 11] [--passes 600] [--with NAME:VAR=VALUE,...]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

from e2e_overhead import interleaved, median_ci, with_option

JOB = """
import statistics, sys, time
import torch
torch.manual_seed(0); torch.set_num_threads(1)
passes = int(sys.argv[1])
D = 64
m = torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.ReLU(), torch.nn.Linear(D, D),
                        torch.nn.ReLU(), torch.nn.Linear(D, 1))
opt = torch.optim.SGD(m.parameters(), lr=1e-3)
x, y, z = torch.randn(8, D), torch.randn(8, 1), torch.randn(2, D)
perf = time.perf_counter
took = {1: [], 8: []}
for i in range(4 * passes):
    loss = torch.nn.functional.mse_loss(m(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i % 4 != 3:
        continue
    n = 1 if i % 8 == 3 else 8
    t = perf()
    with torch.no_grad():
        for _ in range(n):
            m(z)
    took[n].append(perf() - t)
fast = {n: statistics.median(sorted(v)[: max(1, len(v) // 3)]) for n, v in took.items()}
fwd = (fast[8] - fast[1]) / 7
print("RESULT", repr(fwd), repr(fast[1] - fwd))
"""


def _run(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            fwd, per_pass = line.split()[1:]
            return float(fwd), float(per_pass)
    raise RuntimeError(f"{cmd[:4]} failed: {out.stderr[-500:]}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=11)
    p.add_argument("--passes", type=int, default=600)
    with_option(p, "an arm of perftop run with these environment settings")
    a = p.parse_args()
    res = interleaved(JOB, [str(a.passes)], a.runs, a.settings, _run)
    print(
        f"passes of forward calls with grad off (a 6-module MLP), {a.runs} interleaved rounds "
        f"of {a.passes} passes; the median over rounds, and of (arm - that round's plain run) "
        "with its 95% confidence interval"
    )
    for f, what in ((0, "per forward call"), (1, "per pass")):
        base = statistics.median(r[f] for r in res["plain"]) * 1e6
        print(f"  {what:<17} plain {base:7.1f} µs")
        for arm, got in res.items():
            if arm == "plain":
                continue
            diff = sorted((g[f] - q[f]) * 1e6 for g, q in zip(got, res["plain"], strict=True))
            lo, hi = median_ci(diff)
            med = statistics.median(diff)
            print(
                f"  {'':<17} {arm:<8} {statistics.median(g[f] for g in got) * 1e6:7.1f} µs: "
                f"{med:+.1f} µs (95% CI {lo:+.1f} to {hi:+.1f}), {1 + med / base:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
