"""How fast the live TUI answers keys while the job prints a flood: the real ``perftop run``
(recording on, as by default) in a real terminal (tmux), a quiet job and a chatty one
(``--rate`` lines/s, 50,000 by default) side by side in one run.

A key is answered when the screen shows it: ``?`` until the help box is on the terminal,
any other key until it is gone, read with ``tmux capture-pane`` every few milliseconds
(so a figure includes up to one poll, ~5-10 ms, of reading).

    python benchmarks/tui_keys_chatty.py [--rate 50000] [--presses 20] [--no-record]

Target: every key answered within 200 ms whatever the job prints.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JOB = """
import sys, time
rate, seconds = float(sys.argv[1]), float(sys.argv[2])
t0 = time.monotonic(); n = 0
while time.monotonic() - t0 < seconds:
    target = int((time.monotonic() - t0) * rate)
    while n < target:
        print(f"line {n} of a chatty job, loss 0.{n % 9999:04d}")
        n += 1
    sys.stdout.flush()
    time.sleep(0.005)
print(f"printed {n} lines in {time.monotonic() - t0:.1f} s", file=sys.stderr)
"""


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True).stdout


def until(name: str, shown: bool, timeout: float) -> float | None:
    """Seconds until the help box is (``shown``) or is not on the screen; None: never."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if ("perftop help" in tmux("capture-pane", "-p", "-t", f"={name}:")) == shown:
            return time.monotonic() - t0
        time.sleep(0.003)
    return None


def measure(rate: float, args: argparse.Namespace, tmp: Path) -> dict[str, object]:
    name = f"pt-keys-{uuid.uuid4().hex[:6]}"
    job = tmp / "job.py"
    job.write_text(JOB)
    seconds = args.warmup + args.presses * 2 * (args.every + 1.0) + 30
    rec = ["--no-record"] if args.no_record else ["--record", str(tmp / f"{name}.perftop")]
    cmd = [sys.executable, "-m", "perftop", "run", *rec, sys.executable, str(job), str(rate),
           str(seconds)]  # fmt: skip
    env = f"PYTHONPATH={shlex.quote(str(ROOT))}"
    tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "48", "-c", str(tmp),
         f"{env} {shlex.join(cmd)}; sleep 30")  # fmt: skip
    lat: list[float] = []
    missed = 0
    try:
        deadline = time.monotonic() + 60
        while "─ Output ─" not in tmux("capture-pane", "-p", "-t", f"={name}:"):
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"perftop never showed its screen:\n{tmux('capture-pane', '-p', '-t', name)}"
                )
            time.sleep(0.2)
        time.sleep(args.warmup)
        for _ in range(args.presses):
            for key, shown in (("?", True), ("x", False)):
                tmux("send-keys", "-t", f"={name}:", "-l", key)
                t = until(name, shown, args.timeout)
                if t is None:
                    missed += 1
                    until(name, shown, 60)  # wait it out, so that the next press starts clean
                else:
                    lat.append(t)
                time.sleep(args.every)
        screen = tmux("capture-pane", "-p", "-t", f"={name}:")
    finally:
        pane = tmux("display", "-p", "-t", f"={name}:", "#{pane_pid}").strip()
        if pane:
            subprocess.run(["pkill", "-INT", "-P", pane], capture_output=True)
        time.sleep(1)
        tmux("kill-session", "-t", f"={name}")
    subtitle = [ln for ln in screen.splitlines() if " lines " in ln[-40:]]
    return {"lat": lat, "missed": missed, "output": subtitle[-1].strip("╰─╯ ") if subtitle else ""}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=50_000, help="the chatty job's lines per second")
    ap.add_argument("--presses", type=int, default=15, help="help open/close pairs per job")
    ap.add_argument("--every", type=float, default=0.3, help="seconds between key presses")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument(
        "--timeout", type=float, default=10.0, help="a key unanswered after this: missed"
    )
    ap.add_argument("--no-record", action="store_true", help="run without a recording")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is needed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        quiet = measure(10, args, Path(d))
        chatty = measure(args.rate, args, Path(d))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"key latency of perftop run{' --no-record' if args.no_record else ''} at 160x48, "
          f"{args.presses * 2} keys per job (ms); {os.cpu_count()} CPUs, load {load}:")  # fmt: skip
    print(f"  {'job':<22} {'median':>7} {'p95':>7} {'max':>7}  missed  Output panel")
    figures = {}
    for label, r in (("quiet (10 lines/s)", quiet), (f"chatty ({args.rate:,.0f} lines/s)", chatty)):
        lat = sorted(r["lat"])  # type: ignore[arg-type]
        if not lat:
            print(f"  {label:<22} no key answered")
            continue
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
        figures[label] = (statistics.median(lat), p95, lat[-1])
        med, p95, mx = (x * 1000 for x in figures[label])
        print(f"  {label:<22} {med:7.0f} {p95:7.0f} {mx:7.0f}  {r['missed']:6}  {r['output']}")
    if len(figures) == 2:
        (qm, qp, qx), (cm, cp, cx) = figures.values()
        print(f"  chatty / quiet: median {cm / qm:.1f}x, p95 {cp / qp:.1f}x, max {cx / qx:.1f}x")
        ok = cx <= 0.2 and not chatty["missed"]
        print(
            f"  target (every key within 200 ms under the chatty job): {'met' if ok else 'NOT met'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
