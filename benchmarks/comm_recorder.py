"""What reading c10d's flight recorder costs a distributed job (docs/distributed.md).

Two figures, on CPU gloo:

- ``dump``: one read of the recorder's ring, as perftop's hook makes it twice a second on
  its background thread (``_dump_fr_trace`` with the Python stacks and ``pickle.loads``),
  beside the same read without the stacks, with the ring full (``TORCH_FR_BUFFER_SIZE``
  entries, each made 24 frames deep), and the longest pause a Python loop on another
  thread saw meanwhile (the GIL the dump holds);
- ``step``: a DDP job's median step, torchrun with 2 ranks, side by side: no recorder, the
  recorder on (``TORCH_FR_BUFFER_SIZE=256``, what perftop asks for), and the recorder read
  every 0.5 s as the hook does. Rounds alternate the arms.

    python benchmarks/comm_recorder.py [--rounds 3] [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from typing import Any

JOB = textwrap.dedent("""
    import json, os, statistics, sys, threading, time
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    if os.environ.get("READ") == "1":
        def read():
            import pickle
            while True:
                time.sleep(0.5)
                pickle.loads(torch._C._distributed_c10d._dump_fr_trace(True, True, False))
        threading.Thread(target=read, daemon=True).start()
    net = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)])
    model = DDP(net, bucket_cap_mb=0.25)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randn(64, 256)
    times = []
    for _ in range(int(sys.argv[1])):
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        print("MEDIAN", statistics.median(times[20:]), flush=True)
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)
""")


def _deep(n: int, fn: Any) -> None:
    if n:
        return _deep(n - 1, fn)
    fn()


def dump_cost(size: int) -> dict[str, float]:
    """Both reads, alternated: with the stacks (the hook's) and without."""
    os.environ["TORCH_FR_BUFFER_SIZE"] = str(size)
    import torch
    import torch.distributed as dist

    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    t = torch.ones(16)
    _deep(20, lambda: [dist.all_reduce(t) for _ in range(size + 10)])
    raw = torch._C._distributed_c10d._dump_fr_trace
    gaps: list[float] = []
    done = threading.Event()

    def loop() -> None:
        last = time.perf_counter()
        while not done.is_set():
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    th = threading.Thread(target=loop)
    th.start()
    took: dict[bool, list[float]] = {True: [], False: []}
    for i in range(40):
        stacks = bool(i % 2)
        t0 = time.perf_counter()
        pickle.loads(raw(True, stacks, False))
        took[stacks].append(time.perf_counter() - t0)
        time.sleep(0.05)
    done.set()
    th.join()
    dist.destroy_process_group()
    return {"entries": size, "dump_ms_p50": statistics.median(took[True]) * 1e3,
            "dump_no_stacks_ms_p50": statistics.median(took[False]) * 1e3,
            "longest_pause_ms": max(gaps) * 1e3}  # fmt: skip


def step(arm: str, steps: int, path: str) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("TORCH_FR_BUFFER_SIZE", None)
    if arm != "off":
        env["TORCH_FR_BUFFER_SIZE"] = "256"
    env["READ"] = "1" if arm == "read" else "0"
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         path, str(steps)],
        capture_output=True, text=True, env=env, timeout=600, check=True,
    ).stdout  # fmt: skip
    return float(next(ln.split()[1] for ln in out.splitlines() if ln.startswith("MEDIAN")))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "job.py")
        with open(path, "w") as f:
            f.write(JOB)
        res: dict[str, list[float]] = {"off": [], "on": [], "read": []}
        for _ in range(a.rounds):
            for arm in res:
                res[arm].append(step(arm, a.steps, path))
    for arm, v in res.items():
        print(f"step {arm:>4}: median {statistics.median(v) * 1e3:.3f} ms "
              f"(rounds: {', '.join(f'{x * 1e3:.3f}' for x in v)})")  # fmt: skip
    print("dump", json.dumps(dump_cost(256)))


if __name__ == "__main__":
    main()
