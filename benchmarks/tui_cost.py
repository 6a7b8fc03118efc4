"""What the live TUI costs: the monitor's own CPU while showing a busy job, and the ingest
rate of the event pipeline. Synthetic events go through the real socket ``Server``,
``Hub`` and ``Session``; the real ``PerftopApp`` renders (headless) at the refresh rate.

    python benchmarks/tui_cost.py [--seconds 10] [--events 400000]

Targets: monitor CPU < 5% of one core at 2 Hz with 16 workers and 1,000 steps/s;
ingest >= 200,000 events/s.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perftop.events import Hello, JobStart, LoaderInfo, SessionStart
from perftop.hints.session import hinted_session
from perftop.monitor.hub import Hub
from perftop.monitor.server import Server
from perftop.recording import RecordingWriter
from perftop.wire import MAGIC, STEP_RECORD, encode_frame, encode_steps_frame

WORKERS = 16
MAIN_PID = 10_000


def step_frame(start: int, n: int, t0: float) -> bytes:
    """A frame of packed step records, as the hook's sender encodes them (1 ms steps)."""
    return encode_steps_frame(
        STEP_RECORD.pack(MAIN_PID, i, t0 + i * 1e-3, t0 + (i + 1) * 1e-3, 2e-4, 3e-4, 1e-4, 3)
        for i in range(start, start + n)
    )


def intro() -> list:
    t = time.time()
    workers = tuple((w, MAIN_PID + 1 + w) for w in range(WORKERS))
    return [
        Hello(t, MAIN_PID, 1, "bench", ("train.py",)),
        LoaderInfo(t, MAIN_PID, 0, WORKERS, 64, True, 2, True, workers, "Synthetic"),
    ]


def produce(path: str, seconds: float, rate: int) -> None:
    """A fake job in its own process: 1,000 steps/s in 10 frames a second, like the hook."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(MAGIC + encode_frame(intro()))
    per_tick, tick, i = rate // 10, 0.1, 0
    t0 = time.time()
    end = time.monotonic() + seconds
    nxt = time.monotonic()
    while time.monotonic() < end:
        s.sendall(step_frame(i, per_tick, t0))
        i += per_tick
        nxt += tick
        time.sleep(max(0.0, nxt - time.monotonic()))
    s.close()


def tui_cpu(seconds: float, refresh_s: float, rate: int) -> float:
    """Percent of one core used by this process (server, ingest, app) while showing."""
    from perftop.tui.app import PerftopApp
    from perftop.tui.messages import SnapshotMessage

    app = PerftopApp()
    session = hinted_session()
    ingest = Hub(session, refresh_s=refresh_s)
    ingest.snapshot_subscribers.append(lambda s: app.post_message(SnapshotMessage(s)))
    ingest.start()
    ingest.submit(SessionStart(time.time(), ("python", "train.py"), "/", "bench", os.getpid(), ""))
    ingest.submit(JobStart(time.time(), MAIN_PID, ("python", "train.py")))
    server = Server(ingest.submit_frame).start()
    warmup = 2.0
    proc = mp.get_context("fork").Process(
        target=produce, args=(str(server.path), seconds + warmup + 1, rate)
    )
    proc.start()
    marks: dict[str, float] = {}

    def mark(name: str) -> None:
        marks[name] = time.process_time()
        marks[name + "_wall"] = time.monotonic()

    def on_start() -> None:
        app.set_timer(warmup, lambda: mark("a"))
        app.set_timer(warmup + seconds, lambda: (mark("b"), app.exit()))

    app.call_later(on_start)
    app.run(headless=True, size=(160, 48))
    proc.join()
    server.close()
    ingest.stop()
    snap = session.snapshot()
    assert snap.steps.count > 0 and len(snap.roles) == WORKERS + 1, "the job was not seen"
    return 100.0 * (marks["b"] - marks["a"]) / (marks["b_wall"] - marks["a_wall"])


def ingest_rate(n_events: int) -> float:
    """Events per second from a socket client through Server -> Hub (recording to a
    file) -> Session."""
    session = hinted_session()
    tmp = tempfile.TemporaryDirectory()
    ingest = Hub(session)
    ingest.subscribe(RecordingWriter(Path(tmp.name) / "bench.perftop"), buffered=False)
    ingest.start()
    server = Server(ingest.submit_frame).start()
    frames = [step_frame(i, 1000, 0.0) for i in range(0, n_events, 1000)]
    total = len(frames) * 1000
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(server.path))
    t0 = time.perf_counter()
    s.sendall(MAGIC)
    for f in frames:
        s.sendall(f)
    while ingest.events_in < total:
        time.sleep(0.001)
    dt = time.perf_counter() - t0
    s.close()
    server.close()
    ingest.stop()
    tmp.cleanup()
    assert session.snapshot().steps.count == total
    return total / dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--refresh", type=float, default=0.5)
    ap.add_argument("--rate", type=int, default=1000, help="steps per second")
    ap.add_argument("--events", type=int, default=400_000)
    a = ap.parse_args()
    cpu = tui_cpu(a.seconds, a.refresh, a.rate)
    ok_cpu = cpu < 5.0
    print(
        f"monitor CPU while showing {WORKERS} workers at {a.rate} steps/s, "
        f"refresh {a.refresh:g}s: {cpu:.2f}% of a core (target < 5%) "
        f"{'OK' if ok_cpu else 'MISSED'}"
    )
    rate = ingest_rate(a.events)
    ok_rate = rate >= 200_000
    print(f"ingest: {rate:,.0f} events/s (target >= 200,000) {'OK' if ok_rate else 'MISSED'}")
    return 0 if ok_cpu and ok_rate else 1


if __name__ == "__main__":
    sys.exit(main())
