"""What the hook adds to each step of the tight CPU job, counted rather than timed:
instructions, simulated cache misses and branch mispredictions per step (valgrind's
callgrind), for the plain job, this checkout and the last release, in one run.

Whole-process timings (``e2e_overhead.py``) of a ~170 µs step scatter by a few µs from run
to run, as much as the hook costs. Counts do not: the same job executes the same
instructions each run. Each arm runs the job of ``e2e_overhead.py`` twice under callgrind
(``--cache-sim=yes --branch-sim=yes``: the host's L1 caches and a branch predictor
simulated), for ``base`` and ``base + steps`` steps after its warm-up; the difference per
step leaves start-up and exit out. The hook arms send to a socket that only drains (no
monitor: its process is not the job's) with sync detection off (its cost is
``sync_sample_cost.py``'s).

Under valgrind the job runs tens of times slower, so work the hook does by the clock (its
sends, 4 a second; the release's sender thread, 10) would come that many times more often
per step. Each hook arm runs from a copy whose ``INTERVAL_S`` is scaled by the slowdown
measured on the plain arm, so sends come as often per step as natively.

    python benchmarks/hook_instructions.py [--steps 1000] [--release ecda10e]

Needs valgrind (Debian: ``apt-get install valgrind``); ~20 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BASE_STEPS = 100
SHOWN = {  # callgrind's event names -> the columns (summed)
    "instructions": ("Ir",),
    "L1i misses": ("I1mr",),
    "L1d misses": ("D1mr", "D1mw"),
    "mispredicts": ("Bcm", "Bim"),
}


def _e2e() -> Any:
    spec = importlib.util.spec_from_file_location("e2e_overhead", HERE / "e2e_overhead.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def job_setup(e2e: Any, d: Path) -> tuple[Path, dict[str, str], float]:
    """``e2e_overhead.py``'s job written into ``d``, the environment every arm runs it with
    (one torch thread, a fixed hash seed), and its wall seconds a step natively."""
    job = d / "job.py"
    job.write_text(e2e.JOB)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    base.update(OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    return job, base, e2e._run([sys.executable, str(job), "3000"], base, str(d))[0]


def sink(path: str) -> None:
    """A socket that takes whatever is sent to it, on daemon threads."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)

    def drain(c: socket.socket) -> None:
        while c.recv(1 << 20):
            pass

    def serve() -> None:
        while True:
            c, _ = srv.accept()
            threading.Thread(target=drain, args=(c,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def counted(job: Path, steps: int, env: dict[str, str], out: Path) -> tuple[dict[str, int], float]:
    """callgrind's totals for the job at ``steps`` steps, and its wall seconds a step."""
    cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--branch-sim=yes",
           f"--callgrind-out-file={out}", sys.executable, str(job), str(steps)]  # fmt: skip
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    result = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT")]
    if run.returncode != 0 or not result:
        raise RuntimeError(f"the job failed under valgrind: {run.stderr[-400:]}")
    text = out.read_text(errors="replace")
    names = re.search(r"^events: (.+)$", text, re.M)
    totals = re.search(r"^(?:summary|totals): (.+)$", text, re.M)
    if names is None or totals is None:
        raise RuntimeError(f"no totals in {out}")
    return dict(
        zip(names.group(1).split(), map(int, totals.group(1).split()), strict=False)
    ), float(result[0].split()[1])


def per_step(
    job: Path, steps: int, env: dict[str, str], d: Path, tag: str, repeat: int
) -> tuple[list[dict[str, float]], float]:
    """Events per step between ``BASE_STEPS`` and ``BASE_STEPS + steps`` steps, once per
    long run (``repeat`` of them, side by side with the short one), and the long runs'
    wall seconds a step under valgrind. Repeats show the spread: a full garbage collection
    falling inside the window or not moves a few hundred misses a step."""
    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(counted, job, BASE_STEPS, env, d / f"{tag}.a.out")
        longs = [pool.submit(counted, job, BASE_STEPS + steps, env, d / f"{tag}.b{i}.out")
                 for i in range(repeat)]  # fmt: skip
        ca, _ = a.result()
        got = [f.result() for f in longs]
    rows = [{k: (cb[k] - ca[k]) / steps for k in cb if k in ca} for cb, _ in got]
    return rows, min(w for _, w in got)


def _col(row: dict[str, float], events: tuple[str, ...]) -> float:
    return sum(row.get(e, 0.0) for e in events)


def scaled_copy(root: Path, into: Path, factor: float) -> Path:
    """``root``'s perftop package in ``into``, its sender's INTERVAL_S times ``factor``."""
    shutil.copytree(root / "perftop", into / "perftop", ignore=shutil.ignore_patterns("*.c"))
    sender = into / "perftop" / "hook" / "sender.py"
    src = sender.read_text()
    new, n = re.subn(r"^INTERVAL_S = ([0-9.]+)",
                     lambda m: f"INTERVAL_S = {float(m.group(1)) * factor:.3f}", src, flags=re.M)  # fmt: skip
    if n != 1:
        raise RuntimeError(f"no INTERVAL_S in {sender}")
    sender.write_text(new)
    return into


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--release", default="ecda10e", help="a git revision; '' for none")
    p.add_argument("--repeat", type=int, default=2, help="long runs per arm")
    a = p.parse_args()
    if shutil.which("valgrind") is None:
        print("hook_instructions: valgrind is not installed (apt-get install valgrind)",
              file=sys.stderr)  # fmt: skip
        return 2
    e2e = _e2e()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        job, base, native = job_setup(e2e, d)
        plain, slow_wall = per_step(job, a.steps, base, d, "plain", a.repeat)
        slowdown = slow_wall / native
        print(f"plain job: {native * 1e6:.0f} µs a step natively, {slowdown:.0f}x that under "
              f"valgrind; hook arms send every INTERVAL_S x {slowdown:.0f}")  # fmt: skip
        roots = {"this": HERE.parent}
        if a.release:
            roots[a.release] = e2e.export(a.release, Path(tempfile.mkdtemp(dir=tmp)))
        sock = str(d / "sink.sock")
        sink(sock)
        rows: dict[str, list[dict[str, float]]] = {"plain": plain}
        for name, root in roots.items():
            copy = scaled_copy(root, Path(tempfile.mkdtemp(dir=tmp)), slowdown)
            hook = (copy / "perftop" / "_bootstrap", copy)
            env = dict(base, PYTHONPATH=os.pathsep.join(map(str, hook)), PERFTOP_SOCKET=sock,
                       PERFTOP_SYNC="off")  # fmt: skip
            print(f"{name:<8} hot path: {e2e.hot_path(root)}")
            rows[name] = per_step(job, a.steps, env, d, name, a.repeat)[0]
    print(f"per step over {a.steps} steps, each long run (callgrind; L1 caches of this host's "
          "sizes, simulated):")  # fmt: skip
    print(f"  {'arm':<8}" + "".join(f"{h:>22}" for h in SHOWN))
    ref = [statistics.mean(_col(r, evs) for r in plain) for evs in SHOWN.values()]
    for name, runs in rows.items():
        cells = []
        for k, evs in enumerate(SHOWN.values()):
            vals = " ".join(f"{_col(r, evs) - (ref[k] if name != 'plain' else 0):+.0f}"
                            for r in runs)  # fmt: skip
            cells.append(vals if name != "plain" else f"{_col(runs[0], evs):.0f}")
        print(f"  {name:<8}" + "".join(f"{c:>22}" for c in cells))
    print("  (plain: the job's own counts; the others: added to plain's mean, per long run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
