"""What perftop's bootstrap costs a Python child of the job at start-up.

Under ``perftop run`` every Python process of the job runs the bootstrap
(``perftop/_bootstrap/sitecustomize.py``), most of them never importing torch. Here, side
by side and interleaved: ``python -c pass`` and ``python -c "import torch"``, each run
plainly and with the environment ``perftop run`` gives its job (the bootstrap first on
PYTHONPATH, ``PERFTOP_SOCKET`` naming a live monitor's socket, so a torch import arms the
hook). Wall time from ``fork`` to exit, best and median of the runs, and the difference;
then the bootstrap's own time inside ``python -c pass`` (``-X importtime``), which a busy
machine's noise on the whole process's time cannot hide.

    python benchmarks/child_startup.py [--runs 20] [--torch-runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perftop.monitor.jobenv import hook_env  # noqa: E402
from perftop.monitor.server import Server  # noqa: E402

CHILDREN = {"python -c pass": "pass", "python -c 'import torch'": "import torch"}


def once(code: str, env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return time.perf_counter() - t


def bootstrap_ms(env: dict[str, str]) -> float:
    """The bootstrap's own time in ``python -c pass`` (``-X importtime``: sitecustomize,
    with what it imports), without the process start-up's noise around it."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], env=env,
                       capture_output=True, text=True, check=True)  # fmt: skip
    for ln in r.stderr.splitlines():
        if ln.split("|")[-1].strip() == "sitecustomize":
            return int(ln.split("|")[1]) / 1e3
    return 0.0


def measure(runs: int, torch_runs: int) -> list[tuple[str, str, list[float]]]:
    plain = dict(os.environ)
    with tempfile.TemporaryDirectory() as d:
        server = Server(lambda frame, events: None, os.path.join(d, "m.sock")).start()
        try:
            under = hook_env(server.path, plain)
            rows = []
            for label, code in CHILDREN.items():
                n = torch_runs if "torch" in code else runs
                once(code, plain)  # warm the page cache and the .pyc files
                once(code, under)
                times: dict[str, list[float]] = {"plain": [], "perftop": []}
                for _ in range(n):  # interleaved: a busy moment hits both alike
                    times["plain"].append(once(code, plain))
                    times["perftop"].append(once(code, under))
                rows += [(label, how, ts) for how, ts in times.items()]
            boot = [bootstrap_ms(under) / 1e3 for _ in range(runs)]
            rows.append(("the bootstrap itself", "perftop", boot))
        finally:
            server.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="runs of python -c pass (each way)")
    ap.add_argument("--torch-runs", type=int, default=5, help="runs of import torch")
    args = ap.parse_args()
    rows = measure(args.runs, args.torch_runs)
    print(f"{'child':28} {'run':8} {'best ms':>9} {'median ms':>10} {'+ median':>9}")
    base: dict[str, float] = {}
    for label, how, ts in rows:
        med = statistics.median(ts) * 1e3
        if how == "plain":
            base[label] = med
        extra = f"{med - base[label]:+9.1f}" if how != "plain" and label in base else ""
        print(f"{label:28} {how:8} {min(ts) * 1e3:9.1f} {med:10.1f} {extra:>9}")


if __name__ == "__main__":
    main()
