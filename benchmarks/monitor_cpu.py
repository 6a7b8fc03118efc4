"""What the monitor costs beside htop and nvitop: one job, watched four ways, interleaved.

Each arm runs the same job (the demo; ``loader4``: the demo's input pipeline in 4
DataLoader workers) for a fixed number of steps, in tmux at 160x48 on a private server:

- ``tui``      ``perftop run`` with its TUI (refresh 0.5 s, probes 1 s: the defaults);
- ``headless`` ``perftop run --headless``;
- ``htop``     the job alone, ``htop -d 5`` (0.5 s, perftop's refresh) in the pane;
- ``htop15``   the same at htop's default ``-d 15`` (1.5 s);
- ``nvitop``   the job alone, ``nvitop --interval 0.5`` in the pane (N/A without NVML);
- ``none``     the job alone: its steps/s without any monitor;
- ``tui-base``, ``headless-base`` (with ``--compare DIR``): perftop from another tree.

The monitor's CPU is psutil's ``cpu_times`` of the monitor's process tree (perftop and
its helpers, not the job's tree; htop; nvitop), from ``--warmup`` s after the job's DataLoader
workers started (the steady state: torch's import and the model's set-up are over) to
the job's end, per second of wall: percent of one core; beside it, in CPU seconds per
second, the monitor process's own (its rusage: user + system time as ``/proc/PID/stat``
counts them, without its helpers). The tmux server's CPU (the terminal drawing what the
monitor writes) is printed beside it. The TUI arm also reads
the header's ``perftop CPU`` off the screen every 2 s, to check the two agree.

    python benchmarks/monitor_cpu.py [--repeats 3] [--jobs demo,loader4] [--steps 120] [--compare DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
JOBS = {
    "demo": ["--scenario", "mixed"],
    "loader4": ["--scenario", "input", "--workers", "4"],
}
ARMS = ("tui", "headless", "htop", "htop15", "nvitop", "none")
CHILD = """
import os, sys, time
from perftop.demo.train import main
out, argv = sys.argv[1], sys.argv[2:]
with open(out + ".pid.tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(out + ".pid.tmp", out + ".pid")
t0 = time.monotonic()
main(argv)
with open(out + ".tmp", "w") as f:
    f.write(f"{argv[argv.index('--steps') + 1]} {time.monotonic() - t0}")
os.replace(out + ".tmp", out)
"""
HEADER_CPU = re.compile(r"perftop CPU\s+([0-9.]+)%")


class Tmux:
    """A private tmux server (its own socket): one pane of 160x48."""

    def __init__(self, name: str) -> None:
        self.base = ["tmux", "-L", name, "-f", "/dev/null"]

    def start(self, command: str, width: int, height: int, cwd: Path) -> int:
        """Run ``command`` in ``cwd``: not this tree, whose ``perftop`` ``python -m``
        would import before another tree's on ``PYTHONPATH``."""
        size = ["-x", str(width), "-y", str(height)]
        subprocess.run(
            [*self.base, "new-session", "-d", "-c", str(cwd), *size, command],
            check=True,
            env={**os.environ, "TERM": "xterm-256color"},
        )
        out = self.query("#{pane_pid} #{pid}")
        pane, server = out.split()
        self.server = int(server)
        return int(pane)

    def query(self, fmt: str) -> str:
        return subprocess.run(
            [*self.base, "display", "-p", fmt], capture_output=True, text=True, check=True
        ).stdout.strip()

    def screen(self) -> str:
        r = subprocess.run([*self.base, "capture-pane", "-p"], capture_output=True, text=True)
        return r.stdout

    def kill(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True)


def tree_cpu(root: int, exclude: set[int]) -> float:
    """CPU seconds of ``root`` and its live descendants, leaving out ``exclude``'s trees."""
    total = 0.0
    try:
        procs = [psutil.Process(root)]
        procs += procs[0].children(recursive=True)
    except psutil.Error:
        return float("nan")
    skip = set(exclude)
    for pid in exclude:
        try:
            skip |= {c.pid for c in psutil.Process(pid).children(recursive=True)}
        except psutil.Error:
            pass
    for p in procs:
        try:
            if p.pid in skip:
                continue
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def end_trees(*roots: int) -> None:
    """Kill what this run started: perftop outlives its terminal (a running job goes on,
    so does its monitor), so killing tmux is not enough."""
    procs: list[psutil.Process] = []
    for root in roots:
        if root <= 0:  # not started
            continue
        try:
            top = psutil.Process(root)
            procs += [top, *top.children(recursive=True)]
        except psutil.Error:
            pass
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=5)


def cpu_of(pid: int) -> float:
    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except psutil.Error:
        return float("nan")


def started(out: Path, timeout: float = 180.0) -> int:
    """The job's pid, once it trains: its DataLoader workers run (they start at its first
    batch, after torch's import and the model's set-up, whose growing memory the monitor
    reads at every tick)."""
    pidfile = Path(str(out) + ".pid")
    end = time.monotonic() + timeout
    while not pidfile.exists() or not pidfile.read_text():
        if time.monotonic() > end:
            raise SystemExit(f"the job did not start in {timeout:g} s")
        time.sleep(0.1)
    pid = int(pidfile.read_text())
    while not out.exists():
        try:
            if psutil.Process(pid).children():
                break
        except psutil.Error:
            break
        if time.monotonic() > end:
            raise SystemExit(f"the job did not train in {timeout:g} s")
        time.sleep(0.1)
    return pid


def run_arm(
    arm: str, job: str, steps: int, warmup: float, tmp: Path, k: int, base: str = ""
) -> dict:
    """One run: the monitor's and the terminal's CPU (% of a core), the job's steps/s."""
    out = tmp / f"{arm}-{job}-{k}.txt"
    child = tmp / "child.py"
    job_cmd = [sys.executable, str(child), str(out), *JOBS[job], "--steps", str(steps)]
    q = shlex.join
    err = tmp / f"{arm}-{k}.err"  # what a monitor that cannot run says, once it is gone
    perftop = "perftop"
    if arm.endswith("-base"):  # the same, from another tree's perftop
        perftop = f"env PYTHONPATH={q([base])} {q([sys.executable])} -m perftop"
    pane_cmd = {
        "tui": f"exec {perftop} run --no-record -- {q(job_cmd)}",
        "headless": f"exec {perftop} run --headless --no-record -- {q(job_cmd)} >/dev/null 2>&1",
        "htop": "exec htop -d 5",
        "htop15": "exec htop -d 15",
        "nvitop": f"exec nvitop --interval 0.5 2>{q([str(err)])}",
        "none": "exec sleep 3600",
    }[arm.removesuffix("-base")]
    tmux = Tmux(f"perftop-bench-{os.getpid()}-{k}")
    job_proc = None
    pane = job_pid = -1
    try:
        pane = tmux.start(pane_cmd, 160, 48, tmp)
        if not arm.startswith(("tui", "headless")):
            job_proc = subprocess.Popen(
                job_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp
            )
        t_launch = time.monotonic()
        said = ""  # what the pane showed last: a monitor that exits says why there
        for _ in range(10):  # a monitor that cannot run (nvitop without NVML) exits soon
            time.sleep(0.5)
            said = tmux.screen().strip() or said
            if not _alive(pane):
                return {"na": f"{arm} exited at once: {_said(said, err)}"}
        job_pid = started(out)
        time.sleep(warmup)
        if out.exists():  # nothing left to measure (a headless monitor has exited with it)
            return {"na": f"the job ended within the {warmup:.0f} s warm-up: give more --steps"}
        c0, s0, w0 = tree_cpu(pane, {job_pid}), cpu_of(tmux.server), time.monotonic()
        o0 = cpu_of(pane)
        header: list[float] = []
        while not out.exists():
            time.sleep(2.0 if arm.startswith("tui") else 0.2)
            if arm.startswith("tui"):
                m = HEADER_CPU.search(tmux.screen())
                if m:
                    header.append(float(m.group(1)))
            if time.monotonic() - t_launch > 30 * 60:
                raise SystemExit(f"{arm}: the job did not end")
        if not _alive(pane):
            return {"na": f"{arm} exited while the job ran: {_said(said, err)}"}
        c1, s1, w1 = tree_cpu(pane, {job_pid}), cpu_of(tmux.server), time.monotonic()
        o1 = cpu_of(pane)
        n, secs = out.read_text().split()
        return {
            "cpu": 100 * (c1 - c0) / (w1 - w0),
            "own": (o1 - o0) / (w1 - w0),
            "term": 100 * (s1 - s0) / (w1 - w0),
            "steps_s": int(n) / float(secs),
            "header": statistics.mean(header) if header else None,
            "window": w1 - w0,
        }
    finally:
        end_trees(job_pid, pane, *([job_proc.pid] if job_proc is not None else []))
        tmux.kill()
        if job_proc is not None:
            job_proc.wait()


def _said(screen: str, err: Path) -> str:
    """What a monitor that exited said: on its screen, else on its stderr."""
    if not screen and err.exists():
        screen = re.sub(r"\x1b\[[0-9;]*m", "", err.read_text(errors="replace"))  # colours
    return " ".join(screen.split())[:120]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--jobs", default="demo,loader4")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument(
        "--compare",
        metavar="DIR",
        help="also run the TUI and headless arms with the perftop of this tree (an unpacked "
        "`git archive` of a base commit, its compiled tracker copied in): tui-base, headless-base",
    )
    ap.add_argument(
        "--warmup", type=float, default=3.0, help="seconds after the job's workers started"
    )
    a = ap.parse_args()
    for tool in ("tmux", "perftop"):
        if shutil.which(tool) is None:
            print(f"monitor_cpu: {tool} not found on PATH")
            return 2
    arms = [x for x in a.arms.split(",") if x]
    if a.compare:
        arms[1:1] = [f"{x}-base" for x in ("tui", "headless") if x in arms]
    if not shutil.which("htop"):
        arms = [x for x in arms if not x.startswith("htop")]
        print("htop: not installed, left out")
    if not shutil.which("nvitop") and "nvitop" in arms:
        arms.remove("nvitop")
        print("nvitop: not installed (pip install nvitop), left out")
    with tempfile.TemporaryDirectory(prefix="perftop-monitor-cpu-") as d:
        tmp = Path(d)
        (tmp / "child.py").write_text(CHILD)
        for job in a.jobs.split(","):
            results: dict[str, list[dict]] = {arm: [] for arm in arms}
            na: dict[str, str] = {}
            k = 0
            for rep in range(a.repeats):
                order = arms[rep % len(arms) :] + arms[: rep % len(arms)]  # interleaved
                for arm in order:
                    if arm in na:
                        continue
                    k += 1
                    r = run_arm(arm, job, a.steps, a.warmup, tmp, k, a.compare or "")
                    if "na" in r:
                        na[arm] = r["na"]
                    else:
                        results[arm].append(r)
                        print(f"  [{job} {rep + 1}/{a.repeats}] {arm:9s} {_line(r)}", flush=True)
            report(job, a, results, na)
    return 0


def _line(r: dict) -> str:
    head = "" if r["header"] is None else f"  header says {r['header']:.1f}%"
    return (
        f"monitor {r['cpu']:5.2f}% of a core ({r['own']:.4f} CPU-s/s its own)  "
        f"tmux {r['term']:5.2f}%  "
        f"job {r['steps_s']:.2f} steps/s  ({r['window']:.0f} s){head}"
    )


def report(job: str, a: argparse.Namespace, results: dict[str, list[dict]], na: dict) -> None:
    def med(arm: str, key: str) -> float | None:
        xs = [r[key] for r in results.get(arm, []) if r[key] is not None]
        return statistics.median(xs) if xs else None

    print(f"\n{job}: {a.steps} steps, {a.repeats} interleaved runs per arm (medians)")
    print(
        "arm        monitor CPU  own CPU-s/s  tmux CPU  job steps/s  vs no monitor"
        "  monitor / htop -d 5"
    )
    base = med("none", "steps_s")
    htop = med("htop", "cpu")
    for arm, rs in results.items():
        if arm in na:
            print(f"{arm:9s}  N/A: {na[arm]}")
            continue
        if not rs:
            continue
        cpu, term, sps = med(arm, "cpu"), med(arm, "term"), med(arm, "steps_s")
        own = med(arm, "own")
        vs = f"{sps / base:.3f}" if base and sps else "-"
        mon = "-" if arm == "none" else f"{cpu:.2f}%"
        own_s = "-" if arm == "none" or own is None else f"{own:.4f}"
        rel = f"{cpu / htop:.2f}" if htop and cpu and arm != "none" else "-"
        print(f"{arm:9s}  {mon:>11}  {own_s:>11}  {term:7.2f}%  {sps:11.2f}  {vs:>13}  {rel:>19}")
    hdr = med("tui", "header")
    if hdr is not None:
        print(
            f"TUI header's 'perftop CPU' (mean of its readings): {hdr:.2f}%, "
            f"benchmark {med('tui', 'cpu'):.2f}%"
        )


if __name__ == "__main__":
    sys.exit(main())
