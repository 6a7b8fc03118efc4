"""Microseconds the hook adds to a training step, measured side by side in one process.

The same tiny CPU loop (DataLoader batch, forward, backward, optimizer step: a few hundred
microseconds) runs in short rounds with the hook off, on without sync detection, and on
with sync detection at its default sampling. The hook is installed once, as in a real run,
and its patches are switched between rounds, so the step tracker and the sync sampler keep
their state; a real monitor listens in another process and decodes every frame.

Figures are per step, on the training thread's own CPU clock (``time.thread_time``: what
the target is about, and what a busy machine's scheduling does not inflate). Each "on"
round is compared with the "off" rounds beside it and the median of those differences is
reported, which cancels slow drifts of the machine.

    python benchmarks/hook_overhead.py [--rounds 120] [--steps 400] [--e2e-runs 5]
                                       [--compare /path/to/another/checkout]

Then the whole-process figure (benchmarks/e2e_overhead.py): ``perftop run`` of a ~0.4 ms
CPU step against the plain job, ``--e2e-runs`` interleaved rounds (paired medians), with the hook's
sender thread and the rest of the process included; ``--compare`` adds another checkout's
perftop (a build of main) to the same interleaving.

The hot path is steps.py compiled by Cython when it is built (``setup.py build_ext
--inplace``), else the plain module; ``PERFTOP_PURE=1`` measures the latter. The output
says which.

Target: at most 5 µs added per step on the training thread, sync detection included.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
import torch.optim.optimizer as optim_mod
import torch.utils.data.dataloader as dl
from torch.utils.data import DataLoader, TensorDataset

import perftop.hook as hook
from benchmarks import e2e_overhead
from perftop.hook import impl

TARGET_US = 5.0

# A real monitor socket in its own process: it decodes every frame and counts the events.
LISTENER = """
import sys
from perftop.monitor.server import Server
n = [0]
srv = Server(lambda frame, events: n.__setitem__(0, n[0] + len(events)), sys.argv[1]).start()
print("ready", flush=True)
sys.stdin.read()
srv.close()
print(n[0], flush=True)
"""


def make_loop(steps: int) -> Callable[[], tuple[float, float, float]]:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(steps * 4, 16), torch.randn(steps * 4, 4))
    loader = DataLoader(data, batch_size=4)

    def run() -> tuple[float, float, float]:
        """(training-thread CPU, whole-process CPU, wall) seconds per step."""
        t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        t1, c1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
        return (c1 - c0) / steps, (p1 - p0) / steps, (t1 - t0) / steps

    return run


class Switch:
    """Turns the installed hook's patches off and on without resetting its state."""

    def __init__(self, st: hook.HookState) -> None:
        self.st = st
        self.tracker = st.tracker
        self.on_step = self.tracker.on_step  # sync detection's per-step callback
        self.patched = (torch.autograd.backward, dl._BaseDataLoaderIter.__next__)
        self.handles: list = []
        for h in st.handles:  # the optimizer hooks: re-registered on each switch
            h.remove()
        st.uninstall()  # restores the originals; keeps the tracker, sender and sampler
        self.original = (torch.autograd.backward, dl._BaseDataLoaderIter.__next__)

    def set(self, on: bool, sync: bool = True) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []
        fns = self.patched if on else self.original
        torch.autograd.backward, dl._BaseDataLoaderIter.__next__ = fns
        if on:
            self.handles = [
                optim_mod.register_optimizer_step_pre_hook(self.tracker.opt_pre_hook),
                optim_mod.register_optimizer_step_post_hook(self.tracker.opt_post_hook),
            ]
        self.tracker.on_step = self.on_step if (on and sync) else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=120)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--e2e-runs", type=int, default=5, help="0: skip the whole-process figure")
    p.add_argument("--compare", action="append", default=[], metavar="CHECKOUT")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "bench.sock")
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
        mon = subprocess.Popen(
            [sys.executable, "-c", LISTENER, path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert mon.stdout is not None and mon.stdout.readline().strip() == "ready"
        st = hook.install(path)  # patches torch (already imported), sync detection included
        run = make_loop(args.steps)
        run()  # warm up with everything on
        sw = Switch(st)
        run()
        arms: dict[str, list[tuple[float, float, float]]] = {"off": [], "hook": [], "full": []}
        order = [
            ("off", False, False),
            ("hook", True, False),
            ("off", False, False),
            ("full", True, True),
        ]
        for i in range(args.rounds):
            for name, on, sync in order if i % 2 == 0 else order[::-1]:
                sw.set(on, sync)
                arms[name].append(run())
        sw.set(True)
        st.sender.close()
        received, _ = mon.communicate("")

    def paired(name: str, field: int) -> float:
        """Median over rounds of (this arm - the mean of that round's two off runs)."""
        offs = arms["off"]
        return (
            statistics.median(
                r[field] - (offs[2 * k][field] + offs[2 * k + 1][field]) / 2
                for k, r in enumerate(arms[name])
            )
            * 1e6
        )

    base = statistics.median(r[0] for r in arms["off"]) * 1e6
    hook_us, full_us = paired("hook", 0), paired("full", 0)
    sender_us = paired("full", 1) - full_us
    wall_us = paired("full", 2)
    print(f"{args.rounds} rounds of {args.steps} steps; off / hook / hook+sync interleaved")
    print(f"hot path                  : {impl.NAME}")
    print(f"step, hook off            : {base:7.1f} µs (training-thread CPU, median)")
    print(f"added, hook without sync  : {hook_us:7.2f} µs/step")
    print(
        f"added, hook with sync     : {full_us:7.2f} µs/step ({100 * full_us / base:.2f}%, "
        f"ratio {(base + full_us) / base:.4f})  <- default"
    )
    print(f"sender thread CPU         : {sender_us:7.2f} µs/step (background thread)")
    print(f"wall time added           : {wall_us:7.2f} µs/step (noisy on a busy machine)")
    print(f"events received           : {received.strip()} (by the monitor process)")
    ok = full_us <= TARGET_US
    print(f"target <= {TARGET_US:.0f} µs/step on the training thread: {'met' if ok else 'NOT met'}")
    if args.e2e_runs > 0:
        others = {Path(c).name: Path(c).resolve() for c in args.compare}
        res = e2e_overhead.measure(args.e2e_runs, 3000, others)
        print("\n".join(e2e_overhead.report(res, args.e2e_runs)))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
