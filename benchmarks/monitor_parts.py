"""What each part of the monitor costs per second, timed inside it: the demo under
``perftop run`` (TUI at 160x48 in tmux, or headless), each part's own thread CPU time
(``time.thread_time`` around its calls, less the parts called inside it) over ``--seconds``
of its steady state, per second of wall: percent of one core.

    python benchmarks/monitor_parts.py [--mode tui|headless] [--seconds 30] [--warmup 8]
        [--tree DIR]   # the perftop of another tree (`git archive` of a base, tracker copied in)

Unlike ``monitor_profile.py`` (py-spy's samples, scaled), nothing is sampled: the parts'
figures are CPU time, which a busy machine inflates less than it does wall time. Each
thread's total is its own (``/proc/self/task``); what no part covers is that thread's
"rest" (Textual's event loop and messages, the hub's loop, threads' waits' bookkeeping).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (part, module, attribute path): the thread CPU of each call, less the parts inside it
PARTS = (
    ("TUI: panels build their text (show)", "perftop.tui.app", "PerftopApp.show"),
    ("Textual: layout", "textual.screen", "Screen._refresh_layout"),
    ("Textual: compositor, render, diff, write", "textual.screen", "Screen._compositor_refresh"),
    ("TUI: is the job reading stdin", "perftop.tui.job_input_keys", "JobInputKeys._check_input"),
    ("probes: USS/PSS (smaps_rollup)", "perftop.probes.procs", "read_memory"),
    ("probes: processes (psutil, /proc)", "perftop.probes.procs", "ProcProbe.sample"),
    ("probes: host", "perftop.probes.host", "HostProbe.sample"),
    ("probes: GPU", "perftop.probes.gpu", "GpuProbe.sample"),
    ("hints (rules)", "perftop.hints.engine", "HintEngine.update"),
    ("snapshots for subscribers", "perftop.monitor.hub", "Hub._snapshot"),
    ("ingest: model apply, recording", "perftop.monitor.hub", "Hub._handle"),
)
THREADS = {
    "MainThread": "TUI thread (Textual)",
    "perftop-probes": "probe thread",
    "perftop-hub": "hub thread (ingest, model, snapshots)",
    "perftop-server": "socket server (read, decode)",
}


def _threads() -> dict[str, float]:
    """(CPU seconds, times it went off the CPU) of each live thread of this process, by tid:
    a thread's every sleep, GIL wait and wake-up is one context switch."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            st = Path(f"/proc/self/task/{tid}/stat").read_text()
            status = Path(f"/proc/self/task/{tid}/status").read_text()
        except OSError:
            continue
        f = st[st.rindex(")") + 2 :].split()
        switches = sum(
            int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line
        )
        out[tid] = ((int(f[11]) + int(f[12])) / tick, switches)
    return out


def runner(out: str, argv: list[str]) -> None:
    """In the pane: perftop with each part timed; SIGUSR2 starts, SIGUSR1 writes ``out``."""
    import importlib

    on, own, calls = [False], defaultdict(float), defaultdict(int)
    local = threading.local()

    def wrap(name: str, owner: Any, attr: str) -> None:
        real = getattr(owner, attr)

        def timed(*a: Any, **k: Any) -> Any:
            if not on[0]:
                return real(*a, **k)
            stack = local.__dict__.setdefault("stack", [])
            stack.append(0.0)
            t0 = time.thread_time()
            try:
                return real(*a, **k)
            finally:
                spent = time.thread_time() - t0
                inner = stack.pop()
                own[name] += spent - inner
                calls[name] += 1
                if stack:
                    stack[-1] += spent

        setattr(owner, attr, timed)

    for name, module, path in PARTS:
        try:
            owner: Any = importlib.import_module(module)
            *outer, attr = path.split(".")
            for o in outer:
                owner = getattr(owner, o)
            wrap(name, owner, attr)
        except (ImportError, AttributeError):
            pass  # another tree without this part
    start: dict[str, Any] = {}

    def begin(*_: Any) -> None:
        start.update(wall=time.monotonic(), cpu=time.process_time(), threads=_threads())
        on[0] = True

    def end(*_: Any) -> None:
        on[0] = False
        wall = time.monotonic() - start["wall"]
        names = {str(t.native_id): t.name for t in threading.enumerate()}
        threads: dict[str, float] = defaultdict(float)
        switches: dict[str, int] = defaultdict(int)
        for tid, (cpu, n) in _threads().items():
            name = names.get(tid, "other threads")
            cpu0, n0 = start["threads"].get(tid, (0.0, 0))
            threads[name] += cpu - cpu0
            switches[name] += n - n0
        result = {"wall": wall, "cpu": time.process_time() - start["cpu"]}
        result |= {"threads": threads, "parts": own, "calls": calls, "switches": switches}
        Path(out).write_text(json.dumps(result))
        os._exit(0)

    signal.signal(signal.SIGUSR2, begin)
    signal.signal(signal.SIGUSR1, end)
    from perftop.cli import main

    sys.argv = ["perftop", *argv]
    sys.exit(main())


def report(r: dict, mode: str) -> None:
    wall = r["wall"]
    pct = lambda s: 100 * s / wall  # noqa: E731
    print(f"{mode}: {wall:.0f} s; the monitor process {pct(r['cpu']):.2f}% of a core")
    thread_of = {p[0]: p[0].split(":")[0] for p in PARTS}
    groups = {
        "TUI": "MainThread",
        "Textual": "MainThread",
        "probes": "perftop-probes",
        "hints (rules)": "perftop-hub",
        "snapshots for subscribers": "perftop-hub",
        "ingest": "perftop-hub",
    }
    covered: dict[str, float] = defaultdict(float)
    print(f"{'part':48s} {'% of a core':>11} {'calls/s':>8}")
    for name, _, _ in PARTS:
        s = r["parts"].get(name, 0.0)
        covered[groups[thread_of[name]]] += s
        if s:
            n = r.get("calls", {}).get(name, 0) / wall
            print(f"{name:48s} {pct(s):10.2f}% {n:8.1f}")
    for thread, cpu in sorted(r["threads"].items(), key=lambda kv: -kv[1]):
        label = THREADS.get(thread, thread)
        rest = cpu - covered.get(thread, 0.0)
        if pct(rest) >= 0.01:
            what = f"{label}: rest" if thread in covered else label
            print(f"{what:48s} {pct(rest):10.2f}%")
    waits = r["switches"]
    if waits:
        print("\nthread                                           context switches/s")
        for thread, n in sorted(waits.items(), key=lambda kv: -kv[1]):
            if n:
                print(f"{THREADS.get(thread, thread):48s} {n / wall:10.1f}")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--runner":
        runner(sys.argv[2], sys.argv[3:])
    from monitor_cpu import CHILD, JOBS, Tmux, end_trees, started

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("tui", "headless"), default="tui")
    ap.add_argument("--job", choices=tuple(JOBS), default="demo")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--tree", metavar="DIR", help="time the perftop of this tree")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="perftop-monitor-parts-") as d:
        tmp = Path(d)
        (tmp / "child.py").write_text(CHILD)
        out, result = tmp / "job.txt", tmp / "parts.json"
        job = [sys.executable, str(tmp / "child.py"), str(out), *JOBS[a.job], "--steps", "10000"]
        flag = ["--headless"] if a.mode == "headless" else []
        tail = " >/dev/null 2>&1" if a.mode == "headless" else ""
        env = f"env PYTHONPATH={shlex.quote(a.tree)} " if a.tree else ""
        me = [sys.executable, str(Path(__file__).resolve()), "--runner", str(result)]
        cmd = shlex.join([*me, "run", *flag, "--no-record", "--", *job])
        tmux = Tmux(f"perftop-parts-{os.getpid()}")
        pane = job_pid = -1
        try:
            pane = tmux.start(f"exec {env}{cmd}{tail}", 160, 48, tmp)
            job_pid = started(out)
            time.sleep(a.warmup)
            os.kill(pane, signal.SIGUSR2)
            time.sleep(a.seconds)
            os.kill(pane, signal.SIGUSR1)
            deadline = time.monotonic() + 10
            while not result.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            r = json.loads(result.read_text())
        finally:
            end_trees(job_pid, pane)
            tmux.kill()
    report(r, a.mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
