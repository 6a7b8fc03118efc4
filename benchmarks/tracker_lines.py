"""How many lines and pages of the compiled tracker's code a step runs through, for this
checkout and others, counted with valgrind's callgrind.

Each of a step's entries into the tracker (a batch, ``backward()``, ``opt.step()``) comes
after ~1.4M instructions of torch, which leave none of perftop's code in the instruction
cache or its pages in the TLB: what an entry costs is mostly how many 64-byte lines (and
4 KB pages) of code it touches, not how many instructions it runs. This counts them, per
step, in the job of ``e2e_overhead.py``: each arm runs the job twice under ``callgrind
--dump-instr=yes`` (``base`` and ``base + steps`` steps after its warm-up) and keeps the
instructions of the tracker's extension (``perftop/hook/_steps_fast*.so``) that ran at
least once a step more in the long run; it prints how many distinct instructions those
are, the lines and pages they lie on, and how many of them lie in the ``.cold`` parts GCC
split off (code its profile or heuristics took for rare). Arms send to a socket that only
drains, with sync detection off, their send interval scaled by valgrind's slowdown
(``hook_instructions.py``'s way).

    python benchmarks/tracker_lines.py [--steps 1000] [--compare CHECKOUT ...]

Needs valgrind; ~3 minutes an arm on 2 cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BASE_STEPS = 200
NAMED = re.compile(r"(c?ob|c?fn)=\((\d+)\)(?: (.*))?$")


def _load(name: str) -> Any:
    """The benchmark ``name`` beside this one, as a module (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def executed(out: Path, lib: str) -> Counter[int]:
    """Per instruction address (relative to the object) of ``lib``: how often it ran,
    from a callgrind file written with ``--dump-instr=yes`` (positions: instr line)."""
    names: dict[str, str] = {}
    counts: Counter[int] = Counter()
    obj: str | None = None
    last, after_call = 0, False
    for line in out.read_text(errors="replace").splitlines():
        m = NAMED.match(line)
        if m:
            key, num, name = m.groups()
            if key.endswith("ob"):
                if name:
                    names[num] = name
                if key == "ob":
                    obj = names.get(num)
            continue
        if line.startswith("calls="):
            after_call = True  # the next line is the call's inclusive cost: not ours
            continue
        if not line or line[0] not in "0123456789+-*":
            continue
        parts = line.split()
        pos = parts[0]
        if pos.startswith("0x"):
            last = int(pos, 16)
        elif pos[0] in "+-":
            last += int(pos)
        if after_call:
            after_call = False
            continue
        if obj is not None and lib in obj and len(parts) > 2:
            counts[last] += int(parts[2])
    return counts


def cold_ranges(so: Path) -> list[tuple[int, int]]:
    """The address ranges of the ``.cold`` parts of ``so``'s functions."""
    out = subprocess.run(["nm", "-S", str(so)], capture_output=True, text=True, check=False)
    got = []
    for ln in out.stdout.splitlines():
        p = ln.split()
        if len(p) == 4 and p[3].endswith(".cold"):
            got.append((int(p[0], 16), int(p[0], 16) + int(p[1], 16)))
    return got


def run(job: Path, steps: int, env: dict[str, str], out: Path) -> tuple[Path, float]:
    """The job under callgrind; its output file and its wall seconds a step there."""
    cmd = ["valgrind", "--tool=callgrind", "--dump-instr=yes", f"--callgrind-out-file={out}",
           sys.executable, str(job), str(steps)]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    result = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT")]
    if done.returncode != 0 or not result:
        raise RuntimeError(f"the job failed under valgrind: {done.stderr[-400:]}")
    return out, float(result[0].split()[1])


def arm(job: Path, steps: int, env: dict[str, str], so: Path, d: Path, tag: str) -> str:
    with ThreadPoolExecutor(2) as pool:
        short = pool.submit(run, job, BASE_STEPS, env, d / f"{tag}.a")
        long = pool.submit(run, job, BASE_STEPS + steps, env, d / f"{tag}.b")
        a, b = executed(short.result()[0], so.name), executed(long.result()[0], so.name)
    cold = cold_ranges(so)
    hot = [x for x in b if b[x] - a.get(x, 0) >= steps]
    n_cold = sum(1 for x in hot if any(lo <= x < hi for lo, hi in cold))
    lines = {x // 64 for x in hot}
    pages = {x // 4096 for x in hot}
    return (f"{len(hot):>13} {len(lines):>11} {len(pages):>7} {n_cold:>15}   "
            f"({len(cold)} .cold parts in the build)")  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--compare", action="append", default=[], metavar="CHECKOUT",
                   help="another checkout, its tracker built in place")  # fmt: skip
    a = p.parse_args()
    if shutil.which("valgrind") is None or shutil.which("nm") is None:
        print("tracker_lines: needs valgrind and nm (binutils)", file=sys.stderr)
        return 2
    hi = _load("hook_instructions")
    e2e = hi._e2e()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        job, base, native = hi.job_setup(e2e, d)
        factor = run(job, BASE_STEPS, base, d / "plain")[1] / native
        sock = str(d / "sink.sock")
        hi.sink(sock)
        print(f"per step over {a.steps} steps (callgrind), the compiled tracker's code; sends "
              f"every INTERVAL_S x {factor:.0f}:")  # fmt: skip
        print(f"  {'arm':<10} {'instructions':>13} {'code lines':>11} {'pages':>7} "
              f"{'in .cold parts':>15}")  # fmt: skip
        roots = {"this": HERE.parent, **{Path(c).name: Path(c) for c in a.compare}}
        for name, root in roots.items():
            found = sorted((root / "perftop" / "hook").glob("_steps_fast*.so"))
            if not found:
                print(f"  {name:<10} no compiled tracker in {root}")
                continue
            copy = hi.scaled_copy(root, Path(tempfile.mkdtemp(dir=tmp)), factor)
            hook = (copy / "perftop" / "_bootstrap", copy)
            env = dict(base, PYTHONPATH=os.pathsep.join(map(str, hook)), PERFTOP_SOCKET=sock,
                       PERFTOP_SYNC="off")  # fmt: skip
            so = copy / "perftop" / "hook" / found[0].name
            print(f"  {name:<10} {arm(job, a.steps, env, so, d, name)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
