"""What the hook costs with no monitor behind it, and what a job's exit waits for it.

1. **No monitor, no cost.** The job of ``benchmarks/e2e_overhead.py`` (a ~0.4 ms CPU step)
   runs plainly, with a leaked ``PERFTOP_SOCKET`` that no monitor answers on (the
   bootstrap on PYTHONPATH, as in a shell started under perftop, after the monitor quit),
   and with a monitor that listens (the hook armed, for scale), interleaved; best and
   median of the runs, µs per step against the plain run.
2. **Shutdown.** A job emits steps as fast as it can for 0.5 s, then exits; the time from
   its last line to the process being gone, plainly, with a live monitor, and with a
   monitor that was SIGSTOPped mid-run (its socket full, the hook's sender thread blocked
   in a send). The hook's exit handler has 100 ms; it is also timed from inside the job.

    python benchmarks/no_monitor_cost.py [--runs 5] [--steps 3000]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.e2e_overhead import JOB  # noqa: E402

BOOTSTRAP = ROOT / "perftop" / "_bootstrap"
# What the hook left armed in the job: perftop's threads, torch's functions patched or not.
STATE = """
import threading
from torch.optim import optimizer as om
ours = [t.name for t in threading.enumerate() if t.name.startswith("perftop")]
patched = hasattr(torch.autograd.backward, "__wrapped__")
print("STATE", len(ours), patched, len(om._global_optimizer_pre_hooks))
"""
EXIT_JOB = """
import sys, time, perftop
sys.stdin.readline()
end = time.perf_counter() + 0.5
while time.perf_counter() < end:
    for _ in range(1000):
        perftop.step()
print("DONE", time.time(), flush=True)
import atexit, perftop.hook as hook
if hook.state() is not None:  # time the hook's own exit handler, from inside the job
    def _timed(run=hook._at_exit):
        t = time.perf_counter()
        run()
        print("HOOKEXIT", time.perf_counter() - t, file=sys.stderr, flush=True)
    atexit.unregister(hook._at_exit)
    atexit.register(_timed)
"""


def _env(sock: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PERFTOP_SOCKET")}
    env["OMP_NUM_THREADS"] = "1"
    if sock is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP), str(ROOT)])
        env["PERFTOP_SOCKET"] = sock
    return env


STATES: dict[str, str] = {}


def _step_cost(job: Path, steps: int, env: dict[str, str], name: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, str(job), str(steps)], env=env, capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    for line in out.stdout.splitlines():
        if line.startswith("STATE"):
            n, patched, hooks = line.split()[1:]
            STATES[name] = f"{n} perftop threads, torch patched: {patched}, {hooks} opt hooks"
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            _, wall, cpu = line.split()
            return float(wall), float(cpu)
    raise RuntimeError(out.stderr[-800:])


HANDLER: dict[str, list[float]] = {}


def _exit_wait(env: dict[str, str], stop: int | None, name: str) -> float:
    job = subprocess.Popen([sys.executable, "-c", EXIT_JOB], env=env, text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)  # fmt: skip
    assert job.stdin is not None and job.stdout is not None
    time.sleep(0.3)  # connected (armed at the first perftop.step) before the stop below
    if stop is not None:
        os.kill(stop, signal.SIGSTOP)
    try:
        job.stdin.write("\n")
        job.stdin.flush()
        done = float(job.stdout.readline().split()[1])
        job.wait(timeout=60)
        gone = time.time() - done
        assert job.stderr is not None
        for line in job.stderr.read().splitlines():
            if line.startswith("HOOKEXIT"):
                HANDLER.setdefault(name, []).append(float(line.split()[1]))
        return gone
    finally:
        if stop is not None:
            os.kill(stop, signal.SIGCONT)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=3000)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        job = Path(d) / "job.py"
        job.write_text(JOB + STATE)
        live = str(Path(d) / "live.sock")
        mon = subprocess.Popen(
            [sys.executable, "-c", "import sys\nfrom perftop.monitor.server import Server\n"
             "Server(lambda f, e: None, sys.argv[1]).start()\nsys.stdin.read()", live],
            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdin=subprocess.PIPE, text=True,
        )  # fmt: skip
        while not os.path.exists(live):
            time.sleep(0.05)
        arms = {"plain": _env(None), "leaked PERFTOP_SOCKET": _env(str(Path(d) / "gone.sock")),
                "monitor listening": _env(live)}  # fmt: skip
        res: dict[str, list[tuple[float, float]]] = {k: [] for k in arms}
        exits: dict[str, list[float]] = {"plain": [], "live monitor": [], "stopped monitor": []}
        try:
            for i in range(a.runs):
                for name in list(arms) if i % 2 == 0 else list(arms)[::-1]:
                    res[name].append(_step_cost(job, a.steps, arms[name], name))
                exits["plain"].append(_exit_wait(_env(None), None, "plain"))
                exits["live monitor"].append(_exit_wait(_env(live), None, "live monitor"))
                exits["stopped monitor"].append(_exit_wait(_env(live), mon.pid, "stopped monitor"))
        finally:
            mon.kill()
            mon.wait()
    print(f"per step, {a.runs} interleaved runs each (µs wall / µs process CPU):")
    for how, f in (("best", min), ("median", statistics.median)):
        wall, cpu = f(r[0] for r in res["plain"]), f(r[1] for r in res["plain"])
        print(f"  {how:<6} plain                 : {wall * 1e6:7.1f} / {cpu * 1e6:6.1f}")
        for name in list(arms)[1:]:
            w, c = f(r[0] for r in res[name]), f(r[1] for r in res[name])
            print(f"         added, {name:<21}: {(w - wall) * 1e6:+7.2f} / {(c - cpu) * 1e6:+6.2f}"
                  f"  (ratio {w / wall:.4f})")  # fmt: skip
    for name, state in STATES.items():
        print(f"  {name:<22}: {state}")
    print("exit: last line to process gone (ms, median / max):")
    for name, xs in exits.items():
        print(f"  {name:<16}: {statistics.median(xs) * 1e3:7.1f} / {max(xs) * 1e3:7.1f}")
    print("exit: the hook's exit handler, timed inside the job (ms, median / max; budget 100):")
    for name, xs in HANDLER.items():
        print(f"  {name:<16}: {statistics.median(xs) * 1e3:7.1f} / {max(xs) * 1e3:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
