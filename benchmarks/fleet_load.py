"""A collector holding a fleet: 64 simulated nodes x 8 ranks at 20 steps/s each, through real
forwarders and the real collector on loopback, with the real TUI (headless) refreshing.

    python benchmarks/fleet_load.py [--nodes 64] [--ranks 8] [--rate 20] [--seconds 60]

The nodes run in a second process: one real :class:`Forwarder` per node (its own thread and
TCP link, the token handshake), fed 10 times a second with packed step records (as a hook's
sender batches them) and a process sample per node a second. This process is the collector
as ``perftop collect`` wires it (Collector, Hub, FleetSession, PerftopApp under Textual's
Pilot); it prints its CPU per 1,000 events/s, its RSS over time, the events dropped (by the
forwarders and by the ingest queue) and how long the TUI takes to answer key presses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perftop.events import Hello, JobStart, ProcSample, SessionStart
from perftop.wire import KIND_STEPS, STEP_RECORD, Frame

TICK_S = 0.1


def nodes(port: int, token: str, n: int, ranks: int, rate: float, seconds: float) -> None:
    """The simulated fleet (run in its own process): prints what the forwarders sent and
    dropped as JSON."""
    from perftop.fleet.forwarder import Forwarder

    fwds = [Forwarder(("127.0.0.1", port), token, host=f"node{i:02d}") for i in range(n)]
    t = time.time()
    for i, f in enumerate(fwds):
        base = 10_000 + 100 * i
        f.write_events(
            [
                SessionStart(t, ("perftop", "run", "train.py"), "/w", f"node{i:02d}", base, "0"),
                JobStart(t, base, ("torchrun", "train.py")),
                *[
                    Hello(t, base + 1 + r, base, f"node{i:02d}", ("train.py",), i * ranks + r, r,
                          n * ranks, "2.13.0", f"cuda:{r}")
                    for r in range(ranks)
                ],
            ]
        )  # fmt: skip
    per_tick, step_s = rate * TICK_S, 1.0 / rate
    index, carry, start = 0, 0.0, time.monotonic()
    next_t, next_sample = start, start + 1.0
    while time.monotonic() - start < seconds:
        carry += per_tick
        k, carry = int(carry), carry - int(carry)
        now = time.time()
        for i, f in enumerate(fwds):
            base = 10_000 + 100 * i
            recs = [
                STEP_RECORD.pack(base + 1 + r, index + j, now - (k - j) * step_s,
                                 now - (k - j - 1) * step_s - 1e-4, 0.1 * step_s,
                                 0.4 * step_s, 0.1 * step_s, 3)
                for r in range(ranks)
                for j in range(k)
            ]  # fmt: skip
            if recs:
                f.write_frame(Frame(KIND_STEPS, b"".join(recs)))
        index += k
        if time.monotonic() >= next_sample:
            next_sample += 1.0
            for i, f in enumerate(fwds):
                base = 10_000 + 100 * i
                rows = tuple(
                    (base + 1 + r, base, "python", "running", 99.0, r, 4, 2 << 30, 1 << 30,
                     1 << 30, 0, 0, 0)
                    for r in range(ranks)
                )  # fmt: skip
                f.write_events([ProcSample(now, 1.0, base, rows)])
        next_t += TICK_S
        time.sleep(max(0.0, next_t - time.monotonic()))
    closers = [threading.Thread(target=f.close) for f in fwds]  # each drains up to 3 s
    for c in closers:
        c.start()
    for c in closers:
        c.join()
    out = {
        "steps_per_rank": index,
        "sent_frames": sum(f.sent_frames for f in fwds),
        "dropped_frames": sum(f.dropped_frames for f in fwds),
        "connects": sum(f.connects for f in fwds),
    }
    print(json.dumps(out))


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def collect(args: argparse.Namespace) -> int:
    from perftop.fleet.collector import Collector
    from perftop.model.fleet import FleetSession
    from perftop.monitor.hub import Hub
    from perftop.tui.app import PerftopApp
    from perftop.tui.messages import SnapshotMessage

    token = secrets.token_hex(16)
    session = FleetSession()
    app = PerftopApp()
    hub = Hub(session, refresh_s=0.5)  # type: ignore[arg-type]
    if not args.no_tui:
        hub.snapshot_subscribers.append(lambda snap: app.post_message(SnapshotMessage(snap)))
    collector = Collector(("127.0.0.1", 0), token, hub.submit_frame, hub.submit, log=lambda s: None)
    hub.start()
    collector.start()
    gen = subprocess.Popen(
        [sys.executable, __file__, "--nodes-process", str(collector.address[1]), token,
         str(args.nodes), str(args.ranks), str(args.rate), str(args.seconds)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    samples: list[tuple[float, float, int, int]] = []  # (t, cpu s, rss, events in)
    keys: list[float] = []
    t0 = time.monotonic()
    done = threading.Event()

    def sample() -> None:  # a thread of its own: the app's loop may be busy
        while not done.wait(1.0):
            now = time.monotonic() - t0
            samples.append((now, time.process_time(), _rss(), hub.hook_events_in))

    threading.Thread(target=sample, daemon=True).start()
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            next_key = t0
            while gen.poll() is None:
                now = time.monotonic()
                if now >= next_key and now - t0 > 5:  # once the fleet is connected
                    for key in ("s", "question_mark", "escape", "2"):
                        k0 = time.perf_counter()
                        await pilot.press(key)
                        keys.append(time.perf_counter() - k0)
                    next_key = now + 2.0
                await pilot.pause(0.05)
            hub.snapshot_subscribers.clear()  # the app closes next: no more snapshots to it
            await pilot.pause(1.0)  # those already posted are shown first
    finally:
        done.set()
        collector.close()
        hub.stop()
    fleet = json.loads(gen.communicate()[0].strip().splitlines()[-1])
    snap = session.snapshot()
    return report(args, samples, keys, fleet, hub.dropped_events, snap)


def report(args, samples, keys, fleet, hub_dropped, snap) -> int:
    warm = [s for s in samples if s[0] >= 10]  # after every link is up and warmed up
    (ta, ca, ra, ea), (tb, cb, rb, eb) = warm[0], warm[-1]
    rate = (eb - ea) / (tb - ta)
    cpu = (cb - ca) / (tb - ta)
    offered = args.nodes * args.ranks * args.rate
    print(
        f"fleet          : {args.nodes} nodes x {args.ranks} ranks x {args.rate:g} steps/s = "
        f"{offered:,.0f} steps/s offered, for {args.seconds:g} s; {len(snap.nodes)} nodes and "
        f"{len(snap.ranks)} ranks in the collector's model"
    )
    print(f"events in      : {rate:,.0f} events/s through the collector (steady state)")
    print(
        f"collector CPU  : {cpu * 100:.0f}% of one core = {cpu * 100 / (rate / 1000):.1f}% "
        f"per 1,000 events/s (collector, ingest, model, TUI at 2 Hz: one process)"
    )
    series = ", ".join(
        f"{s[0]:.0f}s {s[2] / 2**20:.0f}" for s in samples[:: max(1, len(samples) // 8)]
    )
    print(
        f"collector RSS  : {series} MB; {ra / 2**20:.0f} MB at {ta:.0f} s -> {rb / 2**20:.0f} MB "
        f"at {tb:.0f} s ({(rb - ra) / 2**20:+.1f} MB)"
    )
    dropped = fleet["dropped_frames"]
    print(
        f"dropped        : {dropped} frames by the forwarders, {hub_dropped} events by the "
        f"collector's ingest queue; {fleet['sent_frames']:,} frames sent, "
        f"{fleet['connects']} links"
    )
    if keys:
        print(
            f"key press      : {len(keys)} presses (s, ?, escape, 2) answered in median "
            f"{statistics.median(keys) * 1e3:.0f} ms, max {max(keys) * 1e3:.0f} ms (target < 200)"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"conditions     : {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; peak RSS {peak:.0f} MB"
    )
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--nodes-process":
        port, token, n, ranks, rate, seconds = sys.argv[2:8]
        nodes(int(port), token, int(n), int(ranks), float(rate), float(seconds))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rate", type=float, default=20.0, help="steps/s of each rank")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--no-tui", action="store_true", help="no snapshots to the app (ingest only)")
    return asyncio.run(collect(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
