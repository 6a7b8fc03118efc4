"""The whole-process cost of ``perftop run`` on a tight CPU training step, against the
plain job and against the last release, in one run.

A small training job (DataLoader batch, two Linear layers, backward, SGD step, one torch
thread: 0.14-0.4 ms a step, by machine) runs plainly and under ``perftop run --headless
--no-record``, interleaved (A B C, then C B A, ...), ``runs`` times each; the job times its
own loop (wall clock, after a warm-up), its process CPU (all threads: the hook's sender
included) and the sender thread's own CPU. Per arm: the median over rounds of (this
round's run - this round's plain run), µs per step, with its 95% confidence interval and
the spread of those differences (quartiles), and the best of the runs against the best
plain run; then the ratio of each to plain. Pairing each run with the
plain run of its own round cancels the slow drifts of a shared machine.

Where a process's memory lies moves a step's time by itself: plain runs of this job spread
over ~15 µs/step (161-182) with address-space randomization. With ASLR off every run of an
arm has one layout, and the layouts of two arms differ by what each loads first: a placebo
(perftop's bootstrap on the path and no monitor, so the hook never arms and the job runs
plainly) then read +1.6 µs/step over 21 rounds, and +0.2 with layouts at random (40
rounds). A fixed layout is steady, and biased by the arm. So every run gets a layout of its
own (ASLR and hash seed as the system has them), the rounds pair the arms against the slow
drifts of a shared machine, and the median comes with its 95% confidence interval (order
statistics, no assumption on the spread): the rounds it takes are the price of an unbiased
figure. ``--fixed-layout`` runs every arm with ASLR off (``setarch -R``) and round i's hash
seed, as this benchmark did before; ``--placebo`` adds the placebo arm, whose figure is the
noise floor of the run. ``--save FILE`` writes every run's figures; ``--pool FILE...``
reports the runs of several such files together (more rounds, a narrower interval).

``--release REV`` (default ``ecda10e``, the last release) adds that revision as an arm:
exported with ``git archive`` into a temporary folder and its Cython tracker built there
(when Cython is importable; the output says which hot path each arm runs). ``--compare``
adds another checkout's perftop as it is. ``--with NAME:VAR=VALUE[,VAR=VALUE]`` adds this
checkout run with those settings in its environment (``sync-off:PERFTOP_SYNC=off``: the
sync detector's share).

    python benchmarks/e2e_overhead.py [--runs 41] [--steps 3000] [--release ecda10e]
                                      [--compare /path/to/checkout] [--feeder] [--placebo]
                                      [--fixed-layout] [--with NAME:VAR=VALUE,...]
                                      [--save FILE] [--pool FILE...]

``--feeder``: the same step fed by a generator of slices instead of a DataLoader, so the
data wait behind a feeder is timed every step (a forward pre-hook and the busy clock).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")

JOB = """
import os, sys, threading, time
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0); torch.set_num_threads(1)
steps, feeder = int(sys.argv[1]), sys.argv[2:] == ["feeder"]
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(steps * 16, 64), torch.randn(steps * 16, 8))
X, Y = data.tensors
def slices():  # a generator feeding the loop: no DataLoader on the training thread
    for j in range(0, len(X) - 15, 16):
        yield X[j:j + 16], Y[j:j + 16]
def epoch(n):
    for i, (x, y) in enumerate(slices() if feeder else DataLoader(data, batch_size=16)):
        if i == n:
            break
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
epoch(200)  # warm-up
def sender_cpu():  # the hook's sender thread's CPU seconds, 0 without perftop
    ts = [t for t in threading.enumerate() if t.name == "perftop-sender"]
    return time.clock_gettime(time.pthread_getcpuclockid(ts[0].ident)) if ts else 0.0
t0, c0, s0 = time.perf_counter(), time.process_time(), sender_cpu()
epoch(steps)
t1, c1, s1 = time.perf_counter(), time.process_time(), sender_cpu()
print("RESULT", (t1 - t0) / steps, (c1 - c0) / steps, (s1 - s0) / steps)
"""


RELEASE = "ecda10e"
HOT_PATH = "from perftop.hook import impl; print(impl.NAME)"


def _run(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, float]:
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            _, wall, cpu, sender = line.split()
            return float(wall), float(cpu), float(sender)
    raise RuntimeError(f"{cmd[:4]} failed: {out.stderr[-500:]}")


def export(rev: str, into: Path) -> Path:
    """``rev`` of this repository as files in ``into``, its compiled tracker built there:
    in place where Cython is importable, else by pip's isolated build of a wheel (whose
    build requirements bring Cython), the extension taken out of it. Where neither builds,
    that arm runs the plain-Python tracker (printed): against this tree's compiled one, it
    would read several µs a step high."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True,
                             check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=into,
                   capture_output=True, check=False)  # fmt: skip
    if not list(into.glob("perftop/hook/_steps_fast*.so")):
        with tempfile.TemporaryDirectory() as wheels:
            subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(into),
                            "-w", wheels], capture_output=True, check=False)  # fmt: skip
            for whl in Path(wheels).glob("*.whl"):
                with zipfile.ZipFile(whl) as z:
                    for name in z.namelist():
                        if name.startswith("perftop/hook/_steps_fast") and name.endswith(".so"):
                            (into / name).write_bytes(z.read(name))
    return into


def hot_path(root: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", HOT_PATH], env=env, capture_output=True,
                         text=True, check=False)  # fmt: skip
    return out.stdout.strip() or f"unknown: {out.stderr.strip()[-200:]}"


Runs = dict[str, list[tuple[float, float, float]]]


SETARCH = shutil.which("setarch")


def layout(
    cmd: list[str], env: dict[str, str], seed: int | None
) -> tuple[list[str], dict[str, str]]:
    """``cmd`` with ASLR off and hash seed ``seed`` (None: as the system has them)."""
    if seed is None:
        return cmd, env
    env = dict(env, PYTHONHASHSEED=str(seed))
    return ([SETARCH, "-R", *cmd] if SETARCH else cmd), env


def measure(
    runs: int,
    steps: int,
    others: dict[str, Path],
    data: str = "loader",
    fixed: bool = False,
    placebo: bool = False,
    settings: dict[str, dict[str, str]] | None = None,
) -> Runs:
    """(wall, process CPU, sender thread CPU) seconds per step of each run of each arm:
    "plain", "this", ``others``, ``settings`` (this checkout with those environment
    settings) and "placebo"; with ``fixed``, round i runs every arm
    with hash seed i and ASLR off, else each run has a layout of its own."""
    with tempfile.TemporaryDirectory() as d:
        job = Path(d) / "job.py"
        job.write_text(JOB)
        base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        base["OMP_NUM_THREADS"] = "1"
        plain = [sys.executable, str(job), str(steps), data]
        arms: dict[str, tuple[list[str], dict[str, str]]] = {"plain": (plain, base)}
        if placebo:  # the bootstrap's path as ``perftop run`` sets it, and no monitor
            path = f"{ROOT / 'perftop' / '_bootstrap'}{os.pathsep}{ROOT}"
            arms["placebo"] = (plain, dict(base, PYTHONPATH=path))
        for name, root in {"this": ROOT, **others}.items():
            cmd = [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--",
                   *plain]  # fmt: skip
            arms[name] = (cmd, dict(base, PYTHONPATH=str(root)))
        for name, extra in (settings or {}).items():
            arms[name] = (arms["this"][0], {**arms["this"][1], **extra})
        res: Runs = {k: [] for k in arms}
        for i in range(runs):
            order = list(arms) if i % 2 == 0 else list(arms)[::-1]
            for name in order:
                cmd, env = layout(*arms[name], i if fixed else None)
                res[name].append(_run(cmd, env, d))
            print(f"round {i + 1}/{runs} done", file=sys.stderr, flush=True)
    return res


def median_ci(d: list[float], conf: float = 0.95) -> tuple[float, float]:
    """A confidence interval of the median of ``d`` (sorted) that assumes nothing of the
    spread: the order statistics the binomial(n, 1/2) law gives; (min, max) when n is too
    small for ``conf``."""
    n, alpha = len(d), (1.0 - conf) / 2.0
    k, below = 0, 0.0  # below: P(fewer than k of n fall under the median)
    while k < n and below + math.comb(n, k) / 2**n <= alpha:
        below += math.comb(n, k) / 2**n
        k += 1
    return (d[0], d[-1]) if k == 0 else (d[k - 1], d[n - k])


def report(res: Runs, runs: int) -> list[str]:
    """Per arm, µs/step added to the plain job: the paired median with its 95% confidence
    interval and quartiles, best vs best."""
    plain = res["plain"]
    lines = [
        f"whole process, `perftop run` vs plain ({runs} interleaved rounds; the median over "
        "rounds of (arm - that round's plain run), its 95% confidence interval and the "
        "quartiles; best: best run vs best plain)",
        f"  plain job: {statistics.median(r[0] for r in plain) * 1e6:7.1f} µs/step wall, "
        f"{statistics.median(r[1] for r in plain) * 1e6:7.1f} µs/step process CPU (medians)",
    ]
    for name, got in res.items():
        if name == "plain":
            continue
        for f, what in ((0, "wall"), (1, "CPU ")):
            d = sorted((a[f] - b[f]) * 1e6 for a, b in zip(got, plain, strict=True))
            q = statistics.quantiles(d, n=4) if len(d) > 1 else [d[0], d[0], d[0]]
            base = statistics.median(r[f] for r in plain) * 1e6
            best = (min(r[f] for r in got) - min(r[f] for r in plain)) * 1e6
            lo, hi = median_ci(d)
            lines.append(
                f"  {name:<8} {what}: {q[1]:+6.2f} µs/step, 95% CI [{lo:+6.2f} .. {hi:+6.2f}], "
                f"quartiles [{q[0]:+6.2f} .. {q[2]:+6.2f}]; ratio {(base + q[1]) / base:.4f}; "
                f"best {best:+6.2f}"
            )
        sender = statistics.median(r[2] for r in got) * 1e6
        lines.append(f"  {name:<8} sender thread CPU: {sender:5.2f} µs/step (median, in the above)")
    return lines


def pool(files: list[str]) -> Runs:
    """The runs saved with ``--save`` in ``files``, one after the other, for the arms every
    file has (rounds stay paired: each file's rounds are whole)."""
    saved = [json.loads(Path(f).read_text())["runs"] for f in files]
    arms = [k for k in saved[0] if all(k in s for s in saved)]
    return {k: [tuple(r) for s in saved for r in s[k]] for k in arms}


def interleaved(
    job: str,
    args: list[str],
    runs: int,
    settings: list[tuple[str, dict[str, str]]],
    run: Callable[[list[str], dict[str, str], str], T],
) -> dict[str, list[T]]:
    """The job (its source, its arguments) plain and under ``perftop run --headless
    --no-record`` (and under it with each ``--with`` setting), ``runs`` rounds, the arms in
    turn and back (A B, then B A, ...): each round's runs close in time, so a shared
    machine's slow drifts cancel in their differences. ``run(cmd, env, cwd)`` runs one."""
    res: dict[str, list[T]] = {"plain": [], "perftop": [], **{n: [] for n, _ in settings}}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "job.py"
        path.write_text(job)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["OMP_NUM_THREADS"] = "1"
        plain = [sys.executable, str(path), *args]
        hooked = [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--"]
        arms = {"plain": (plain, env), "perftop": (hooked + plain, dict(env, PYTHONPATH=str(ROOT)))}
        for name, extra in settings:
            arms[name] = (arms["perftop"][0], {**arms["perftop"][1], **extra})
        for i in range(runs):
            for name in list(arms) if i % 2 == 0 else list(arms)[::-1]:
                res[name].append(run(*arms[name], d))
            print(f"round {i + 1}/{runs} done", file=sys.stderr, flush=True)
    return res


def with_option(p: argparse.ArgumentParser, what: str) -> None:
    """``--with NAME:VAR=VALUE[,VAR=VALUE]``, as often as wanted: an arm each."""
    p.add_argument("--with", dest="settings", action="append", default=[],
                   metavar="NAME:VAR=VALUE,...", type=setting, help=what)  # fmt: skip


def setting(text: str) -> tuple[str, dict[str, str]]:
    """``NAME:VAR=VALUE,VAR=VALUE`` -> (NAME, {VAR: VALUE})."""
    name, _, pairs = text.partition(":")
    env = dict(p.split("=", 1) for p in pairs.split(",") if "=" in p)
    if not name or not env:
        raise argparse.ArgumentTypeError(f"expected NAME:VAR=VALUE[,VAR=VALUE], got {text!r}")
    return name, env


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=41)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--release", default=RELEASE, help="a git revision; '' for none")
    p.add_argument("--compare", action="append", default=[], metavar="CHECKOUT")
    p.add_argument("--feeder", action="store_true",
                   help="batches from a generator, not a DataLoader: the feeder's data wait "
                   "(hook/first_forward.py) timed every step")  # fmt: skip
    p.add_argument("--placebo", action="store_true",
                   help="an arm with perftop's bootstrap on the path and no monitor (the "
                   "hook never arms): the run's noise floor")  # fmt: skip
    with_option(p, "an arm of this checkout with these environment settings")
    p.add_argument("--save", metavar="FILE", help="also write each run's figures (JSON)")
    p.add_argument("--pool", nargs="+", metavar="FILE",
                   help="run nothing: the report of the runs saved in these files, pooled "
                   "(the arms they all have)")  # fmt: skip
    p.add_argument("--fixed-layout", action="store_true",
                   help="ASLR off and round i's hash seed for every arm: steadier, and "
                   "biased by each arm's own layout")  # fmt: skip
    a = p.parse_args()
    if a.pool:
        res = pool(a.pool)
        print("\n".join(report(res, len(res["plain"]))))
        return 0
    others = {Path(c).name: Path(c).resolve() for c in a.compare}
    with tempfile.TemporaryDirectory() as d:
        if a.release:
            others[a.release] = export(a.release, Path(d))
        for name, root in {"this": ROOT, **others}.items():
            print(f"{name:<8} hot path: {hot_path(root)}")
        data = "feeder" if a.feeder else "loader"
        if a.fixed_layout:
            how = "ASLR off (setarch -R)" if SETARCH else "no setarch: ASLR as the system has it"
            print(f"layout: {how}; round i runs every arm with PYTHONHASHSEED=i")
        else:
            print("layout: each run its own (ASLR and hash seed as the system has them)")
        res = measure(a.runs, a.steps, others, data, fixed=a.fixed_layout, placebo=a.placebo,
                      settings=dict(a.settings))  # fmt: skip
        print("\n".join(report(res, a.runs)))
        if a.save:
            Path(a.save).write_text(json.dumps({"steps": a.steps, "runs": res}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
