"""What sync detection costs per step: the hook with ``PERFTOP_SYNC=sampled`` (default)
against ``PERFTOP_SYNC=off``, on a tiny CPU loop whose steps take a few hundred µs, so
the hook's own cost is not hidden by the work. The step sends its batch with ``.to``,
which the hook wraps to mark device data until the first step ends: its cost per call in
the loop (after the first step) is measured alone too.

Whole-run times differ by more than the cost between runs on a busy machine, so the cost
is also measured directly, within the sampled run: the extra time of the watched steps
(each against the median unwatched step) plus the per-step callback itself, timed alone.
The hook's socket is a listener that never reads (the hook arms only when a monitor
answers): the sender drops what it cannot send.

    python benchmarks/sync_overhead.py [--steps 20000] [--repeats 5]
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
import sys, time, torch
torch.set_num_threads(1)
steps = int(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 16), torch.randn(8, 1)
def step():
    opt.zero_grad()
    xb = x.to("cpu")                    # the batch sent to the device
    loss = ((model(xb) - y) ** 2).mean()
    sel = x[x > 0]                      # a sync site, so the detector has work to do
    loss = loss + 0.0 * sel.sum()
    loss.backward()
    opt.step()
for _ in range(50):
    step()
perf, depth = time.perf_counter, torch._C._len_torch_function_stack
watched, unwatched = [], []
t0 = perf()
for _ in range(steps):
    a, w = perf(), depth() > 0
    step()
    (watched if w else unwatched).append(perf() - a)
dt = perf() - t0
extra = 0.0
if watched:
    base = sorted(unwatched)[len(unwatched) // 2]
    extra = sum(max(0.0, d - base) for d in watched) / steps
def per_call(n=20000):
    best = 1.0
    for _ in range(7):
        c0 = perf()
        for _ in range(n):
            x.to("cpu")
        best = min(best, (perf() - c0) / n)
    return best
send = per_call()  # x.to() as the loop calls it
cb = 0.0
try:
    from perftop import hook
    tr = hook.state().tracker
    if tr.on_step is not None:
        n, i0 = 20000, tr.index + 1
        c0 = perf()
        for i in range(i0, i0 + n):
            tr.on_step(i, perf())
        c1 = perf()
        for i in range(i0, i0 + n):
            perf()
        cb = (c1 - c0 - (perf() - c1)) / n
except Exception:
    pass
print(dt / steps * 1e6, extra * 1e6, cb * 1e6, len(watched), send * 1e6)
"""


_LISTENER: list[socket.socket] = []


def _socket_path() -> str:
    """A listening socket that never reads, kept open for the whole benchmark."""
    if not _LISTENER:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = os.path.join(tempfile.mkdtemp(prefix="perftop-bench-"), "s.sock")
        s.bind(path)
        s.listen(64)
        _LISTENER.append(s)
    return str(_LISTENER[0].getsockname())


def run(mode: str | None, steps: int) -> list[float]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PERFTOP_SYNC", None)
    if mode is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP), str(ROOT)])
        env["PERFTOP_SOCKET"] = _socket_path()
        env["PERFTOP_SYNC"] = mode
    out = subprocess.run(
        [sys.executable, "-c", LOOP, str(steps)], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return [float(v) for v in out.stdout.strip().splitlines()[-1].split()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    configs = {"no hook": None, "hook, sync off": "off", "hook, sync sampled": "sampled"}
    times: dict[str, list[float]] = {k: [] for k in configs}
    direct: list[float] = []
    sends: dict[str, list[float]] = {k: [] for k in configs}
    parts: list[tuple[float, float]] = []
    watched = 0.0
    for _ in range(args.repeats):
        for name, mode in configs.items():
            per_step, extra, callback, n_watched, send = run(mode, args.steps)
            sends[name].append(send)
            times[name].append(per_step)
            if mode == "sampled":
                direct.append(extra + callback)
                parts.append((extra, callback))
                watched = n_watched
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "steps": args.steps,
        "watched_steps": int(watched),
        "us_per_step": {k: round(v, 2) for k, v in med.items()},
        "sync_detection_us_per_step": round(statistics.median(direct), 3),
        "watched_steps_us_per_step": [round(e, 3) for e, _ in parts],
        "callback_us_per_step": [round(c, 3) for _, c in parts],
        # one x.to("cpu") call in the loop, best of 7x20000, median over repeats (the hook
        # wraps it before the first step only: compare with "no hook")
        "to_us_per_call": {k: round(statistics.median(v), 3) for k, v in sends.items()},
        # best-of-N whole-run times: the least disturbed runs; noisy on a shared machine
        "us_per_step_min": {k: round(min(v), 2) for k, v in times.items()},
        "runs": {k: [round(x, 1) for x in v] for k, v in times.items()},
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
