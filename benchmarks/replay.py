"""Replay at scale: a recording of a long job, its size, first frame and seek times.

    python benchmarks/replay.py [--steps 1000000] [--workers 8] [--step-s 0.05]

Writes the recording with the real :class:`RecordingWriter` (flushed every half second of
the simulated clock, as the monitor does), 1 Hz process samples of the main process and
its workers, host samples and probe ticks, with stalls and evaluation pauses; then opens
it as ``perftop replay`` does and seeks to random steps and times once indexed.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perftop.events import (  # noqa: E402
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
from perftop.recording import RecordingWriter  # noqa: E402
from perftop.replay.index import ReplayIndex  # noqa: E402
from perftop.replay.player import Player  # noqa: E402
from perftop.wire import KIND_STEPS, STEP_RECORD, Frame  # noqa: E402

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

    w = RecordingWriter(path, force=True, index=False)
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


def _app_first_frame(path: Path) -> float:
    """Seconds from a fresh interpreter to the replay app showing its first snapshot."""
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run(
        [sys.executable, "-c", FIRST_FRAME, str(path)],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": root},
    )  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


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
    t = time.perf_counter()
    generate(path, args.steps, args.workers, args.step_s)
    gen_s = time.perf_counter() - t
    size = os.path.getsize(path)

    app_first = _app_first_frame(path)
    t = time.perf_counter()
    index = ReplayIndex(path).start()
    player = Player(index)
    player.advance_to((player.now or 0) + 1.0)
    player.snapshot()
    first = time.perf_counter() - t
    index.wait()
    indexed = time.perf_counter() - t

    rnd = random.Random(2)
    times: list[float] = []
    start, end = index.start_t or 0.0, index.end_t or 0.0
    for i in range(args.seeks):
        t = time.perf_counter()
        if i % 2:
            player.seek_step(rnd.randrange(1, index.steps + 1))
        else:
            player.seek_time(rnd.uniform(start, end))
        player.snapshot()
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    player.seek_event(player.events - 1)  # one event back: the worst case of a checkpoint
    player.snapshot()
    back = time.perf_counter() - t
    times.append(back)
    hours = (end - start) / 3600
    print(
        f"recording        : {args.steps:,} steps of ~{args.step_s * 1e3:.0f} ms, "
        f"{args.workers} workers + main sampled at 1 Hz, {hours:.1f} h "
        f"(written in {gen_s:.1f} s)"
    )
    print(
        f"file size        : {size / 1e6:.1f} MB = {size / args.steps:.1f} bytes/step "
        f"(target < 50) {'met' if size / args.steps < 50 else 'NOT met'}"
    )
    print(
        f"first frame      : {app_first:.2f} s in the app, from a fresh interpreter "
        f"(target < 2 s) {'met' if app_first < 2 else 'NOT met'}; "
        f"{first * 1e3:.0f} ms of it reading the file"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"memory           : {peak:.0f} MB peak RSS (writing, then indexing and seeking)")
    print(
        f"index (background): {indexed:.1f} s, {len(index.checkpoints)} checkpoints, "
        f"{len(index.stalls)} stalls, {len(index.gaps)} gaps"
    )
    print(
        f"seek             : {len(times)} seeks (steps, times, one event back) median "
        f"{statistics.median(times) * 1e3:.0f} ms, max {max(times) * 1e3:.0f} ms "
        f"(target < 100) {'met' if max(times) < 0.1 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
