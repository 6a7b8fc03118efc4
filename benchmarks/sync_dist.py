"""What sampled sync detection costs a distributed job: torchrun, 2 ranks, CPU gloo, a
small DDP loop with a sync site, under the hook (its socket points nowhere).

A sampled step on one rank stalls every rank at the next all-reduce, so ranks that sample
different steps make the job pay about world size x the cost of one sampled step. perftop
schedules the sampled steps from the step index alone, the same on every rank. Configs,
measured side by side in one run:

- ``off``: ``PERFTOP_SYNC=off`` (the baseline);
- ``aligned``: the default sampling (every rank watches the same steps);
- ``staggered``: each rank given its own gap (``PERFTOP_SYNC_EVERY`` + rank), so
  their samples fall on different steps: what schedules from each rank's own timings did.

Whole-run times are noisy on a shared machine; the direct figure is rank 0's extra time
in the steps that any rank watched (over its median unwatched step), per step.

``PERFTOP_SYNC_EVERY`` is lowered (default 10) so that a short run holds enough samples.

    python benchmarks/sync_dist.py [--steps 1500] [--every 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOOTSTRAP = ROOT / "perftop" / "_bootstrap"

LOOP = r"""
import os, sys, time
rank = int(os.environ["RANK"])
if os.environ.get("BENCH_STAGGER"):  # a gap of each rank's own, as from its own timings
    os.environ["PERFTOP_SYNC_EVERY"] = str(int(os.environ["PERFTOP_SYNC_EVERY"]) + rank)
import torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")
steps = int(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 64).to("cpu"), torch.randn(32, 64).to("cpu")
def step():
    out = model(x)
    loss = ((out - y) ** 2).mean() + 0.0 * out[out > 0].sum()  # a sync site
    opt.zero_grad()
    loss.backward()
    opt.step()
for _ in range(30):
    step()
dist.barrier()
perf, depth = time.perf_counter, torch._C._len_torch_function_stack
durs, watched = [], []
t0 = perf()
for _ in range(steps):
    a, w = perf(), depth() > 0  # the detector's mode is on for this step
    step()
    durs.append(perf() - a)
    watched.append(w)
dist.barrier()
dt = perf() - t0
everyone = [None, None]
dist.all_gather_object(everyone, watched)
if rank == 0:
    any_w = [any(ws) for ws in zip(*everyone)]
    base = sorted(d for d, w in zip(durs, any_w) if not w)[len(durs) // 3]
    extra = sum(max(0.0, d - base) for d, w in zip(durs, any_w) if w) / steps
    own = [sum(ws) for ws in everyone]
    print("RESULT", dt / steps * 1e6, extra * 1e6, sum(any_w), *own)
dist.destroy_process_group()
"""


def run(config: str, steps: int, every: int, script: str) -> list[float]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP), str(ROOT)])
    env["PERFTOP_SOCKET"] = os.path.join(tempfile.gettempdir(), "perftop-bench-nowhere.sock")
    env["PERFTOP_SYNC"] = "off" if config == "off" else "sampled"
    env["PERFTOP_SYNC_EVERY"] = str(every)
    env.pop("BENCH_STAGGER", None)
    if config == "staggered":
        env["BENCH_STAGGER"] = "1"
    with socket.socket() as sock:  # a free port each run: no clash with one in TIME_WAIT
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_port", str(port), script, str(steps)]  # fmt: skip
    for _ in range(3):  # gloo on a busy 2-core box sometimes aborts at start or teardown
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if out.returncode == 0:
            break
    else:
        raise SystemExit(out.stderr[-3000:])
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return [float(v) for v in line.split()[1:]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(LOOP)
    configs = ("off", "aligned", "staggered")
    rows: dict[str, list[list[float]]] = {k: [] for k in configs}
    try:
        for _ in range(args.repeats):
            for config in configs:
                rows[config].append(run(config, args.steps, args.every, fh.name))
    finally:
        os.unlink(fh.name)

    def med(config: str, i: int) -> float:
        return statistics.median(r[i] for r in rows[config])

    # extra: rank 0's time in the steps any rank watched, over the median unwatched step
    extra = {k: med(k, 1) for k in ("aligned", "staggered")}
    print(
        json.dumps(
            {
                "ranks": 2,
                "steps": args.steps,
                "every": args.every,
                "us_per_step": {k: round(med(k, 0), 1) for k in configs},
                "steps_watched_by_any_rank": {k: int(med(k, 2)) for k in configs[1:]},
                "steps_watched_per_rank": {
                    k: [int(v) for v in rows[k][-1][3:]] for k in configs[1:]
                },
                "sampling_us_per_step": {k: round(v, 1) for k, v in extra.items()},
                "staggered_over_aligned": (
                    round(extra["staggered"] / extra["aligned"], 2)
                    if extra["aligned"] > 0
                    else None
                ),
                "runs_us_per_step": {k: [round(r[0], 1) for r in rows[k]] for k in configs},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
