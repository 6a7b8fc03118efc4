"""FSDP2 (``fully_shard`` on a CPU gloo mesh) for the collectives tests, for torchrun
--nproc_per_node=2: ``LAYERS`` linear layers, each sharded, fed by a DataLoader.

The run is in segments of ``SEG`` steps, one per kind in ``KINDS`` (comma-separated, in
order), each making rank ``SLOW_RANK`` late in its own way:

- ``clean``: no one (the collectives a step makes, as FSDP2 makes them);
- ``loader``: its DataLoader sleeps ``DELAY`` seconds a batch (a slow loader);
- ``extra``: after each step it computes a metric for ``WORK`` seconds of its own CPU
  (more work than the others, on the CPU the others share);
- ``starve``: its training thread, niced by ``NICE``, shares one core with ``BURN`` busy
  processes pinned there, the other ranks kept off that core (a CPU-starved rank, about
  a third as fast as the others whatever else runs: the kernel balances the cores' load
  by weight; only a privileged thread can lower its niceness again, so this comes last).

Rank 0 appends each segment's kind and wall-clock bounds to ``SEGMENTS`` (a JSON line
each), after a barrier at both ends (and one more once ``starve``'s burners spin). No
other collective is made. Each rank writes ``SEGMENTS.arrivals.<rank>``: the system-clock
time (the flight recorder's) at which each step called its forward, where FSDP2 launches
its first all-gather (the tests' own measure of how late a rank came).
"""

import json
import os
import select
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from gloo_exit import exit_cleanly  # beside this script
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

KINDS = os.environ.get("KINDS", "clean").split(",")
SEG = int(os.environ.get("SEG", "8"))
SLOW = int(os.environ.get("SLOW_RANK", "1"))
DELAY = float(os.environ.get("DELAY", "0.05"))
WORK = float(os.environ.get("WORK", "0.05"))
BURN = int(os.environ.get("BURN", "1"))
NICE = int(os.environ.get("NICE", "5"))
LAYERS, DIM, BATCH = int(os.environ.get("LAYERS", "3")), 128, 32

dist.init_process_group("gloo")
rank = dist.get_rank()
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
torch.manual_seed(0)
net = torch.nn.Sequential(*[torch.nn.Linear(DIM, DIM) for _ in range(LAYERS)])
for layer in net:
    fully_shard(layer, mesh=mesh)
fully_shard(net, mesh=mesh)
opt = torch.optim.SGD(net.parameters(), lr=0.01)


class Batches(torch.utils.data.Dataset):
    def __len__(self):
        return SEG * len(KINDS)

    def __getitem__(self, i):
        kind = KINDS[i // SEG]
        if kind == "loader" and rank == SLOW:
            time.sleep(DELAY)  # the slow loader
        return torch.randn(BATCH, DIM)


def extra_work(seconds):
    """A metric of this rank's own: matrix products for ``seconds`` of wall time."""
    a, end = torch.randn(64, 64), time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = torch.tanh(a @ a)


def starve(on):
    """Share one core with busy processes (rank SLOW), or keep off it (the others)."""
    cpus = sorted(os.sched_getaffinity(0))
    if not on:
        for p in burners:
            p.kill()
            p.wait()
        burners.clear()
        os.sched_setaffinity(0, allowed)
        if rank == SLOW:
            try:
                os.nice(-NICE)  # root (a container): back to the others' pace for the exit
            except OSError:
                pass
        return
    core = cpus[-1]
    if rank != SLOW:
        os.sched_setaffinity(0, [c for c in cpus if c != core] or cpus)
        return
    # busy until killed, or this rank is gone, or 60 s passed: never left spinning; each
    # says so once it runs on that core (a loaded host starts a Python slowly: a fixed
    # sleep let a segment of 8 steps pass before any burner spun, and nothing was starved)
    r, w = os.pipe()
    spin = (
        f"import os, time; os.sched_setaffinity(0, [{core}]); os.write({w}, b'x')"
        f"\nend = time.monotonic() + 60"
        f"\nwhile os.getppid() == {os.getpid()} and time.monotonic() < end: pass"
    )
    burners.extend(
        subprocess.Popen([sys.executable, "-S", "-c", spin], pass_fds=(w,)) for _ in range(BURN)
    )
    os.close(w)
    os.sched_setaffinity(0, [core])  # this (the training) thread only
    os.nice(NICE)  # weaker than the burners and any other job on that core
    end, got = time.monotonic() + 30, 0
    while got < BURN and time.monotonic() < end:
        ready, _, _ = select.select([r], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            break
        chunk = os.read(r, 16)
        if not chunk:
            break
        got += len(chunk)
    os.close(r)


allowed, burners = sorted(os.sched_getaffinity(0)), []
segments, arrivals = [], []
loader = torch.utils.data.DataLoader(Batches(), batch_size=None)
for i, x in enumerate(loader):
    kind = KINDS[i // SEG]
    if i % SEG == 0:
        dist.barrier()
        if kind == "starve":
            starve(True)
            dist.barrier()  # rank SLOW's burners spin: the segment starts together
        segments.append({"kind": kind, "t0": time.time()})
    opt.zero_grad()
    arrivals.append(time.time())
    net(x).square().mean().backward()
    opt.step()
    if kind == "extra" and rank == SLOW:
        extra_work(WORK)
    if i % SEG == SEG - 1:
        segments[-1]["t1"] = time.time()
        if kind == "starve":
            starve(False)
        dist.barrier()
if rank == 0 and os.environ.get("SEGMENTS"):
    with open(os.environ["SEGMENTS"], "a") as f:
        f.writelines(json.dumps(s) + "\n" for s in segments)
if os.environ.get("SEGMENTS"):
    with open(f"{os.environ['SEGMENTS']}.arrivals.{rank}", "w") as f:
        json.dump(arrivals, f)
dist.destroy_process_group()
print("rank", rank, "done", flush=True)
exit_cleanly()  # torch's gloo teardown race (gloo_exit.py)
