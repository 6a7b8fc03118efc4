"""CPU cost of one probe tick (process tree + host) for a job of 1 main and 16 workers.

Target: under 5 ms of CPU per tick, i.e. under 0.5% of one core at the default 1 s interval.
Spawns real Python processes (half busy, half sleeping) in a tree like a DataLoader's, then
times ``time.process_time()`` over N ticks of the probes the monitor runs.

    python benchmarks/probe_cost.py [--ticks 200] [--workers 16]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from perftop.probes.gpu import GpuProbe
from perftop.probes.host import HostProbe
from perftop.probes.procs import ProcProbe

TARGET_MS = 5.0
MAIN = """
import subprocess, sys, time
busy = "import time\\nwhile True: sum(range(1000)); time.sleep(0.001)"
idle = "import time\\nwhile True: time.sleep(1)"
kids = [subprocess.Popen([sys.executable, "-c", busy if i % 2 else idle]) for i in range(int(sys.argv[1]))]
print("ready", flush=True)
time.sleep(3600)
"""


WORST: dict[str, float] = {}


def measure(probe, ticks: int) -> float:
    """Mean CPU ms per tick; the worst single tick goes to WORST."""
    probe.sample(time.time())  # the first tick sets up state (new processes, cmdlines)
    worst = 0.0
    c0 = time.process_time()
    for _ in range(ticks):
        c = time.process_time()
        probe.sample(time.time())
        worst = max(worst, time.process_time() - c)
    WORST[type(probe).__name__] = worst * 1000.0
    return (time.process_time() - c0) / ticks * 1000.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--workers", type=int, default=16)
    args = ap.parse_args()
    top = subprocess.Popen([sys.executable, "-c", MAIN, str(args.workers)], stdout=subprocess.PIPE)
    try:
        assert top.stdout is not None and top.stdout.readline().strip() == b"ready"
        time.sleep(0.5)
        procs = ProcProbe(top.pid)
        n = len(procs.sample(time.time())[-1].rows)
        proc_ms = measure(procs, args.ticks)
        host_ms = measure(HostProbe(), args.ticks)
        gpu = GpuProbe()
        gpu_ms = measure(gpu, args.ticks)
        gpu.close()
    finally:
        top.kill()
        top.wait()
        # the workers are orphans once their parent is gone: end them by their pids
        for pid in procs._tracked:
            if pid != top.pid:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
    total = proc_ms + host_ms + gpu_ms
    print(f"processes sampled per tick: {n} (1 main + {args.workers} workers)")
    print(
        f"process tree : {proc_ms:6.3f} ms CPU/tick ({proc_ms / n:.3f} ms per process, "
        f"worst tick {WORST['ProcProbe']:.3f} ms)"
    )
    print(f"host         : {host_ms:6.3f} ms CPU/tick")
    print(f"gpu (NVML)   : {gpu_ms:6.3f} ms CPU/tick ({gpu.__class__.__name__}, this machine)")
    print(f"total        : {total:6.3f} ms CPU/tick = {total / 10:.3f}% of a core at 1 s")
    ok = total < TARGET_MS
    print(f"target < {TARGET_MS:g} ms/tick: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
