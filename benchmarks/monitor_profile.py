"""Where the monitor's CPU goes, per second: py-spy samples the perftop process while it
watches the demo (TUI at 160x48 in tmux, or headless) and each sample is put in one bucket
by the frames on its stack: ingest, snapshots, hints, probes, widgets, Textual's
rendering and diffing, and the rest.

    python benchmarks/monitor_profile.py [--mode tui|headless] [--seconds 20] [--rate 100]
        [--raw FILE]   # also keep py-spy's collapsed stacks
        [--tree DIR]   # the perftop of another tree (`git archive` of a base, tracker copied in)

Each bucket's share of the samples taken on a CPU, times the CPU psutil measured over the
same seconds, is its cost in % of one core (py-spy's own idle test counts threads that wait
for a CPU or the GIL as busy, so its raw counts overstate). Needs py-spy beside this Python or on
PATH (``pip install py-spy``) and ptrace rights over one's own processes.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor_cpu import CHILD, JOBS, Tmux, end_trees, started, tree_cpu

from perftop.monitor.stacks import pyspy

# (bucket, substrings of a frame): a sample goes to the first bucket that any frame of its
# stack matches, so a hint rule run inside a snapshot counts as hints, a probe's psutil
# call as that probe, a widget's Rich text as the widget.
BUCKETS = (
    ("probes: USS/PSS (smaps_rollup)", ("memory_full_info", "read_memory")),
    ("probes: processes (psutil, /proc)", ("probes/procs.py", "probes/procread.py")),
    ("probes: host", ("probes/host.py",)),
    ("probes: GPU", ("probes/gpu.py", "probes/nvml.py")),
    ("hints", ("perftop/hints/",)),
    ("snapshots (model)", ("snapshot (", "perftop/model/snapshot.py")),
    (
        "ingest (socket, decode, model apply, recording)",
        (
            "perftop/monitor/server.py",
            "perftop/wire.py",
            "perftop/wire_stream.py",
            "_handle (",
            "perftop/model/",
            "perftop/recording.py",
        ),
    ),
    ("widgets (building what panels show)", ("perftop/tui/widgets/", "perftop/tui/app.py")),
    ("Textual: layout, compositor, diff, write", ("textual/", "rich/")),
)
OTHER = "other (event loops, threads, monitor bookkeeping)"
# A thread's leaf frame while it waits: py-spy's idle test misses some waits (a thread
# ready to run but without a CPU on a busy machine), so these samples are left out.
IDLE = (
    "Condition.wait",
    "select (",
    "Event.wait",
    "sleep",
    "_wait_for_tstate_lock",
    "WriterThread.run",
    "Queue.get",
)


def bucket(stack: list[str]) -> str:
    """The bucket of one sample (its frames, any order)."""
    for name, keys in BUCKETS:
        if any(k in frame for frame in stack for k in keys):
            return name
    return OTHER


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("tui", "headless"), default="tui")
    ap.add_argument("--job", choices=tuple(JOBS), default="demo")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--raw", help="keep py-spy's collapsed stacks here")
    ap.add_argument(
        "--tree", metavar="DIR", help="profile the perftop of this tree (a `git archive` of a base)"
    )
    a = ap.parse_args()
    spy = pyspy()
    if spy is None:
        print("monitor_profile: py-spy not found (pip install py-spy)")
        return 2
    with tempfile.TemporaryDirectory(prefix="perftop-monitor-profile-") as d:
        tmp = Path(d)
        (tmp / "child.py").write_text(CHILD)
        out = tmp / "job.txt"
        steps = 10_000  # stopped by the end of the run, not by its steps
        job = [sys.executable, str(tmp / "child.py"), str(out), *JOBS[a.job], "--steps", str(steps)]
        flag = "--headless " if a.mode == "headless" else ""
        tail = " >/dev/null 2>&1" if a.mode == "headless" else ""
        tmux = Tmux(f"perftop-profile-{os.getpid()}")
        perftop = "perftop"
        if a.tree:
            perftop = (
                f"env PYTHONPATH={shlex.quote(a.tree)} {shlex.quote(sys.executable)} -m perftop"
            )
        raw = Path(a.raw) if a.raw else tmp / "raw.txt"
        pane = job_pid = -1
        try:
            pane = tmux.start(
                f"exec {perftop} run {flag}--no-record -- {shlex.join(job)}{tail}", 160, 48, tmp
            )
            job_pid = started(out)
            time.sleep(a.warmup)
            c0, w0 = tree_cpu(pane, {job_pid}), time.monotonic()
            subprocess.run(
                [
                    spy,
                    "record",
                    "--nonblocking",
                    "--threads",
                    "-p",
                    str(pane),
                    "-r",
                    str(a.rate),
                    "-d",
                    str(int(a.seconds)),
                    "-f",
                    "raw",
                    "-o",
                    str(raw),
                ],
                check=True,
                capture_output=True,
            )
            c1, w1 = tree_cpu(pane, {job_pid}), time.monotonic()
        finally:
            end_trees(job_pid, pane)
            tmux.kill()
        counts: Counter[str] = Counter()
        for line in raw.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            frames = stack.split(";")
            if not any(k in frames[-1] for k in IDLE):
                counts[bucket(frames)] += int(n)
    cpu = 100 * (c1 - c0) / (w1 - w0)
    total = sum(counts.values()) or 1
    print(
        f"{a.mode}, {a.job}: {a.seconds:g} s at {a.rate} Hz, {total} samples on a CPU; "
        f"psutil over the same time: {cpu:.2f}% of a core"
    )
    print(f"{'where':50s} {'samples':>8} {'% of a core':>11}")
    for name, n in counts.most_common():
        print(f"{name:50s} {100 * n / total:7.1f}% {cpu * n / total:10.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
