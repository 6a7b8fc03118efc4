"""Replay at scale: a recording of a long job, its first frame and seek times, without and
with the saved index, side by side in one run.

    python benchmarks/replay.py [--steps 1000000] [--workers 8] [--step-s 0.05]

Writes the recording with the real :class:`RecordingWriter` (flushed every half second of
the simulated clock, as the monitor does), 1 Hz process samples of the main process and
its workers, host samples and probe ticks, with stalls and evaluation pauses. Then, each
from a fresh interpreter: opens it as ``perftop replay`` does with no saved index (as every
replay did before: the index is built in the background, then saved) and seeks to random
steps and times from the first second on; then the same with the index it saved.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perftop.events import (
    Hello,
    HostSample,
    JobExit,
    JobStart,
    LoaderInfo,
    MonitorStats,
    ProbeTick,
    ProcSample,
    SessionStart,
)
from perftop.recording import RecordingWriter
from perftop.replay import saved
from perftop.wire import KIND_STEPS, STEP_RECORD, Frame

T0 = 1_790_000_000.0
PC0 = 345_600 * 10**9
MAIN = 4242


def generate(
    path: Path, steps: int, workers: int, step_s: float, seed: int = 1, eval_every: int = 20000
) -> None:
    """A training of ``steps`` steps of about ``step_s`` seconds; clock readings are whole
    nanoseconds, as ``time.perf_counter`` gives them."""
    rnd = random.Random(seed)
    ns = 0  # ns since T0

    def now() -> float:
        return T0 + ns / 1e9

    def pc() -> float:  # time.perf_counter() four days after boot
        return (PC0 + ns) / 1e9

    w = RecordingWriter(path, force=True)
    wpids = [MAIN + 1 + i for i in range(workers)]
    w.write_events(
        [
            SessionStart(now(), ("python", "train.py"), "/work", "node1", 1, "0.1.0"),
            JobStart(now(), MAIN, ("python", "train.py")),
            Hello(now(), MAIN, 1, "node1", ("train.py",), 0, 0, 1, "2.13.0", "cuda:0"),
            LoaderInfo(now(), MAIN, 1, workers, 64, True, 2, True, tuple(enumerate(wpids))),
        ]
    )
    rss = {p: 2_000_000_000 + rnd.randrange(1 << 28) for p in [MAIN, *wpids]}
    recs: list[bytes] = []
    next_flush = next_tick = 0
    mono0 = time.monotonic()
    for i in range(steps):
        slow = 10 if rnd.random() < 1 / 5000 else 1  # a stall
        t0, a = now(), pc()
        ns += int(step_s * 1e9 * rnd.uniform(0.0, 0.1))
        b = pc()
        ns += int(step_s * 1e9 * rnd.uniform(0.3, 0.35) * slow)
        c = pc()
        ns += int(step_s * 1e9 * rnd.uniform(0.4, 0.45))
        d = pc()
        ns += int(step_s * 1e9 * rnd.uniform(0.05, 0.06))
        recs.append(STEP_RECORD.pack(MAIN, i, t0, now(), b - a, d - c, pc() - d, 3))
        ns += rnd.randrange(2000, 9000)
        if i % eval_every == eval_every - 1:
            ns += 30 * 10**9  # an evaluation between steps
        if ns >= next_tick:
            _tick(w, now(), rnd, rss, wpids)
            next_tick = ns + 10**9
        if ns >= next_flush:
            w.write_frame(Frame(KIND_STEPS, b"".join(recs)))
            recs.clear()
            w.tick(mono0 + ns / 1e9)  # the writer flushes every half second of this clock
            next_flush = ns + 5 * 10**8
    w.write_frame(Frame(KIND_STEPS, b"".join(recs)))
    w.write_events([JobExit(now(), MAIN, 0)])
    w.close()


def _tick(w: RecordingWriter, t: float, rnd: random.Random, rss: dict, wpids: list) -> None:
    rows = []
    for pid in [MAIN, *wpids]:
        rss[pid] += rnd.choice((0, 0, 0, 4096, -4096, 8192))
        cpu = round(rnd.uniform(90, 100) if pid == MAIN else rnd.uniform(20, 60), 1)
        rows.append(
            (
                pid,
                1 if pid == MAIN else MAIN,
                "python" if pid == MAIN else "pt_data_worker",
                "running",
                cpu,
                rnd.randrange(32),
                4 if pid == MAIN else 3,
                rss[pid],
                rss[pid] // 3,
                rss[pid] // 2,
                0,
                rnd.randrange(1 << 22),
                0,
            )
        )
    w.write_events(
        [
            ProcSample(t, 1.0, MAIN, tuple(rows)),
            HostSample(
                t,
                1.0,
                32,
                round(rnd.uniform(30, 40), 1),
                tuple(round(rnd.uniform(0, 100), 1) for _ in range(32)),
                0.2,
                (9.5, 9.4, 9.3),
                256 << 30,
                (100 << 30) + rnd.randrange(1 << 24),
                150 << 30,
                0,
                0,
                rnd.randrange(1 << 24),
                rnd.randrange(1 << 16),
                2.0,
                rnd.randrange(1 << 12),
                rnd.randrange(1 << 12),
                1 << 30,
            ),
            ProbeTick(t, 1.0, round(rnd.uniform(0, 0.002), 6), round(rnd.uniform(0.002, 0.004), 6)),
            MonitorStats(t, round(rnd.uniform(1, 3), 1), 90_000_000, 0),
        ]
    )


FIRST_FRAME = """
import asyncio, sys, time
t0 = time.perf_counter()
from perftop.tui.replay import make_replay
async def main():
    app, ctl = make_replay(sys.argv[1], playing=False)
    async with app.run_test(size=(160, 48)) as pilot:
        ctl.start()
        while app.shown is None:
            await pilot.pause(0.005)
        print(time.perf_counter() - t0)
        ctl.stop()
asyncio.run(main())
"""

# From a fresh interpreter: open as `perftop replay` does, show the first second, then seek
# to random steps and times at once; a seek past what the index has read waits for it.
SEEKS = """
import json, random, sys, time
t0 = time.perf_counter()
from perftop.replay.index import ReplayIndex
from perftop.replay.player import Player
index = ReplayIndex(sys.argv[1]).start()
player = Player(index)
player.forward(1)
player.advance_to((player.now or 0) + 1.0)
player.snapshot()
first = time.perf_counter() - t0
rnd, seeks, n = random.Random(2), [], int(sys.argv[2])
total_steps = int(sys.argv[3])
for i in range(n):
    t = time.perf_counter()
    if i % 2:
        step = rnd.randrange(1, total_steps + 1)
        while not index.done and index.steps < step:
            time.sleep(0.005)
        player.seek_step(step)
    else:
        frac = rnd.random()
        while not index.done:
            time.sleep(0.005)
        player.seek_time(index.start_t + frac * (index.end_t - index.start_t))
    player.snapshot()
    seeks.append(time.perf_counter() - t)
index.wait()
t = time.perf_counter()
player.seek_event(player.events - 1)  # one event back: the worst case of a checkpoint
player.snapshot()
seeks.append(time.perf_counter() - t)
print(json.dumps({"first": first, "seeks": seeks, "loaded": index.loaded,
                  "indexed": time.perf_counter() - t0, "checkpoints": len(index.checkpoints),
                  "saved": str(index.saved_to or "")}))
"""


def _fresh(script: str, *args: str) -> str:
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": root},
    )  # fmt: skip
    if out.returncode != 0:
        sys.exit(f"benchmark step failed:\n{out.stderr}")
    return out.stdout.strip().splitlines()[-1]


def _app_first_frame(path: Path) -> float:
    """Seconds from a fresh interpreter to the replay app showing its first snapshot."""
    return float(_fresh(FIRST_FRAME, str(path)))


def _seeks(path: Path, seeks: int, steps: int) -> dict:
    return json.loads(_fresh(SEEKS, str(path), str(seeks), str(steps)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--step-s", type=float, default=0.05, help="simulated step time")
    ap.add_argument("--seeks", type=int, default=40)
    ap.add_argument("--keep", metavar="FILE", help="write the recording here and keep it")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    path = Path(args.keep) if args.keep else Path(tmp.name) / "week.perftop"
    saved.sidecar(path).unlink(missing_ok=True)
    t = time.perf_counter()
    generate(path, args.steps, args.workers, args.step_s)
    gen_s = time.perf_counter() - t
    size = os.path.getsize(path)
    # 1. No saved index (a recording from an older perftop, or after a crash): as before,
    # built in the background while the replay runs; then saved beside the recording.
    cold_app = _app_first_frame(path)
    saved.sidecar(path).unlink(missing_ok=True)  # the app may have saved one: not this run's
    cold = _seeks(path, args.seeks, args.steps)
    # 2. With the index it saved.
    warm_app = _app_first_frame(path)
    warm = _seeks(path, args.seeks, args.steps)
    side = os.path.getsize(saved.sidecar(path)) if saved.sidecar(path).exists() else 0
    hours = args.steps * args.step_s / 3600
    print(
        f"recording     : {args.steps:,} steps of ~{args.step_s * 1e3:.0f} ms, "
        f"{args.workers} workers + main sampled at 1 Hz, ~{hours:.1f} h of training "
        f"(written in {gen_s:.1f} s); {size / 1e6:.1f} MB = {size / args.steps:.1f} bytes/step"
    )
    print(
        f"saved index   : {side / 1e6:.1f} MB beside it ({warm['checkpoints']} checkpoints); "
        f"built and saved by the first replay in {cold['indexed']:.1f} s"
    )
    print(f"{'':14s}  {'no saved index':>16s}  {'saved index':>12s}  target")
    _row("first frame (app)", cold_app, warm_app, 1.0, "s")
    _row("first frame (model)", cold["first"], warm["first"], 1.0, "s")
    for label, f in (("seek median", statistics.median), ("seek max", max)):
        _row(label, f(cold["seeks"]), f(warm["seeks"]), 0.1, "s")
    print(
        f"({len(warm['seeks'])} seeks from the first second on, fresh interpreters: steps and "
        "times at random, one event back; without a saved index a seek waits for the index)"
    )
    if not warm["loaded"]:
        print("the saved index was NOT used")
        return 1
    return 0


def _row(label: str, old: float, new: float, target: float, unit: str) -> None:
    ok = "met" if new < target else "NOT met"
    print(f"{label:20s} {old:10.3f} {unit}  {new:10.3f} {unit}   < {target:g} {unit}: {ok}")


if __name__ == "__main__":
    sys.exit(main())
