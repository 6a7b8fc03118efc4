"""A collector holding a fleet: 64 simulated nodes x 8 ranks at 20 steps/s each, through real
forwarders and the real collector on loopback, with the real TUI (headless) refreshing.

    python benchmarks/fleet_load.py [--nodes 64] [--ranks 8] [--rate 20] [--seconds 60]
                                    [--tui process|same|none] [--compare]

The nodes run in a second process: one real :class:`Forwarder` per node (its own thread and
TCP link, the token handshake), fed 10 times a second with packed step records (as a hook's
sender batches them) and a process sample per node a second. This process is the collector
as ``perftop collect`` wires it (Collector, Hub, a FleetSession of hinted sessions, and
the TUI in a process of its own fed through a pipe: PerftopApp under Textual's test driver
there; ``--tui same`` runs it in the collector's process, as before). It prints the events
its model applied against those offered, its CPU-seconds per 1,000 events/s, its RSS over time, the events dropped (by
the forwarders and by the ingest queue), and how long the TUI takes to answer a key press:
from a thread of its own, as a terminal's input thread posts them, keys that change what
the screen shows (focus, sort, zoom, cursor, help) are pressed every ``--key-every``
seconds after the warm-up, each timed until a rendered screen update shows its effect.
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


def _lag(session: Any) -> float:
    """How far the model is behind the nodes: now less the newest event time of the node
    that is furthest behind (the nodes stamp their steps with their wall clock)."""
    try:
        last = [s.last_t for s in list(session.nodes.values()) if s.last_t is not None]
    except RuntimeError:  # a node added meanwhile
        return 0.0
    return time.time() - min(last) if last else 0.0


class KeyProbe:
    """Presses keys from a thread of its own, as a terminal's input thread does, and times
    each from the press to the first screen update that shows its effect: the app's
    ``_display`` (called with the compositor's rendered update) checks the pending key's
    condition, so a key counts as answered once a rendered frame reflects it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.pending: tuple[float, Callable[[], bool], threading.Event] | None = None
        self.latencies: list[float] = []
        self.by_key: dict[str, list[float]] = {}
        self.unanswered = 0

    def displayed(self) -> None:  # the app's thread, after each rendered update
        p = self.pending
        if p is not None and p[1]():
            self.pending = None
            self.latencies.append(time.perf_counter() - p[0])
            p[2].set()

    def press(self, key: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
        from textual import events

        done = threading.Event()
        char = {"question_mark": "?", "escape": None, "down": None}.get(key, key)
        self.pending = (time.perf_counter(), check, done)
        self.app.post_message(events.Key(key, char))  # thread-safe, as a driver's input
        if not done.wait(timeout):
            self.pending = None
            self.unanswered += 1
        elif self.latencies:
            self.by_key.setdefault(key, []).append(self.latencies[-1])

    def cycle(self, table: Any, main: Any) -> Iterator[tuple[str, Callable[[], bool]]]:
        """Keys that each change what the screen shows, with how to tell they did: focus
        the ranks table, sort it by the next column, zoom it, move its cursor, unzoom, open
        and close the help screen, focus the steps panel."""
        app = self.app
        while True:
            yield "8", lambda: app.focused is table
            col = table.sort_column
            yield "s", lambda col=col: table.sort_column != col
            yield "z", lambda: main.maximized is not None
            row = table.cursor_row
            yield "down", lambda row=row: table.cursor_row == row + 1
            yield "escape", lambda: main.maximized is None
            yield "question_mark", lambda: app.screen is not main
            yield "escape", lambda: app.screen is main
            yield "1", lambda: app.focused is not table

    def run(self, table: Any, main: Any, start: float, stop: float, every: float) -> None:
        """Press a key every ``every`` seconds from ``start`` to ``stop`` (monotonic)."""
        time.sleep(max(0.0, start - time.monotonic()))
        for key, check in self.cycle(table, main):
            t = time.monotonic()
            if t >= stop:
                return
            self.press(key, check)
            time.sleep(max(0.0, every - (time.monotonic() - t)))


def probed_app() -> Any:
    """perftop's app, telling its :class:`KeyProbe` of each rendered update."""
    from perftop.tui.app import PerftopApp

    class App(PerftopApp):
        probe: KeyProbe | None = None

        def _display(self, screen: Any, renderable: Any) -> None:  # Textual's own hook
            super()._display(screen, renderable)
            if renderable is not None and self.probe is not None:
                self.probe.displayed()

    return App()


async def drive(
    app: Any, args: argparse.Namespace, t0: float, until: Callable[[], bool]
) -> KeyProbe:
    """Run ``app`` headless at 160x48 and press keys from warm-up to the end of sending,
    until ``until()`` holds."""
    from perftop.tui.widgets import RanksPanel

    probe = KeyProbe(app)
    async with app.run_test(size=(160, 48)):
        app.probe = probe
        keys = threading.Thread(  # timed on its own clock: the app's loop may be busy
            target=probe.run,
            args=(app.query_one(RanksPanel).table, app.screen, t0 + args.warmup,
                  t0 + args.seconds, args.key_every),
            daemon=True,
        )  # fmt: skip
        keys.start()
        while not until():
            await asyncio.sleep(0.1)
        keys.join()
    return probe


async def tui_process(args: argparse.Namespace, fd: int) -> int:
    """The TUI in a process of its own, as ``perftop collect`` runs it: fed by the pipe
    (:func:`perftop.tui.process.feed`); prints what its key probe measured as JSON."""
    from perftop.tui.process import feed

    t0 = time.monotonic()
    app = probed_app()
    feeder = feed(app, fd)
    probe = await drive(app, args, t0, lambda: not feeder.is_alive())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"latencies": probe.latencies, "by_key": probe.by_key,
                      "unanswered": probe.unanswered, "cpu_s": usage.ru_utime + usage.ru_stime,
                      "peak_rss": usage.ru_maxrss * 1024}))  # fmt: skip
    return 0


async def collect(args: argparse.Namespace) -> int:
    from perftop.fleet.collector import Collector
    from perftop.hints.session import hinted_session
    from perftop.model.fleet import FleetSession
    from perftop.monitor.hub import Hub
    from perftop.tui.messages import SnapshotMessage
    from perftop.tui.process import TuiProcess

    token = secrets.token_hex(16)
    session = FleetSession(hinted_session)  # as perftop collect has it
    hub = Hub(session, refresh_s=0.5)  # type: ignore[arg-type]
    collector = Collector(("127.0.0.1", 0), token, hub.submit_frame, hub.submit, log=lambda s: None)
    hub.start()
    collector.start()
    t0 = time.monotonic()
    gen = subprocess.Popen(
        [sys.executable, __file__, "--nodes-process", str(collector.address[1]), token,
         str(args.nodes), str(args.ranks), str(args.rate), str(args.seconds)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    tui: Any = None
    if args.tui == "process":  # as perftop collect runs it
        tui = TuiProcess([sys.executable, __file__, *sys.argv[1:], "--tui-process"],
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
        hub.snapshot_subscribers.append(tui.post)
    samples: list[tuple[float, float, int, int, float]] = []  # t, cpu s, rss, events, lag
    done = threading.Event()

    def sample() -> None:  # a thread of its own: the app's loop may be busy
        while not done.wait(1.0):
            now = time.monotonic() - t0
            samples.append((now, time.process_time(), _rss(), session.events, _lag(session)))

    threading.Thread(target=sample, daemon=True).start()
    try:
        if tui is not None:
            while gen.poll() is None:
                await asyncio.sleep(0.1)
            tui.close()  # after the last snapshot the TUI's process prints its figures
            probe: Any = json.loads(tui.proc.stdout.read().strip().splitlines()[-1])
        elif args.tui == "same":  # the TUI in the collector's process: the design before
            app = probed_app()
            hub.snapshot_subscribers.append(lambda snap: app.post_message(SnapshotMessage(snap)))
            kp = await drive(app, args, t0, lambda: gen.poll() is not None)
            hub.snapshot_subscribers.clear()
            probe = {"latencies": kp.latencies, "by_key": kp.by_key, "unanswered": kp.unanswered}
        else:
            gen.wait()
            probe = {"latencies": [], "by_key": {}, "unanswered": 0}
    finally:
        done.set()
        collector.close()
        hub.stop()
    fleet = json.loads(gen.communicate()[0].strip().splitlines()[-1])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    fleet["cpu_s"] = usage.ru_utime + usage.ru_stime - probe.get("cpu_s", 0.0)
    snap = session.snapshot()
    return report(args, samples, probe, fleet, hub, snap)


def report(args, samples, probe, fleet, hub, snap) -> int:  # type: ignore[no-untyped-def]
    # Steady state: from the warm-up (every link up) to the end of sending.
    warm = [s for s in samples if args.warmup <= s[0] <= args.seconds]
    (ta, ca, ra, ea, _), (tb, cb, rb, eb, _) = warm[0], warm[-1]
    lags = sorted(s[4] for s in warm)
    rate = (eb - ea) / (tb - ta)
    cpu = (cb - ca) / (tb - ta)
    offered = args.nodes * args.ranks * args.rate + args.nodes  # steps, a process sample
    sent_steps = fleet["steps_per_rank"] * args.nodes * args.ranks
    print(
        f"fleet          : {args.nodes} nodes x {args.ranks} ranks x {args.rate:g} steps/s = "
        f"{args.nodes * args.ranks * args.rate:,.0f} steps/s offered, for {args.seconds:g} s; {len(snap.nodes)} nodes and "
        f"{len(snap.ranks)} ranks in the collector's model"
    )
    print(
        f"events in      : {rate:,.0f} events/s applied to the collector's model from "
        f"{ta:.0f} s to {tb:.0f} s, {rate / offered:.1%} of the {offered:,.0f} offered; "
        f"{snap.events:,} in all for {sent_steps:,} steps sent; the model behind the nodes "
        f"by median {statistics.median(lags):.2f} s, max {lags[-1]:.2f} s"
    )
    where = {
        "process": "collector, ingest, model, hints, snapshots to the TUI's pipe",
        "same": "collector, ingest, model, hints, TUI at 2 Hz: one process",
        "none": "collector, ingest, model, hints; no TUI",
    }[args.tui]
    print(
        f"collector CPU  : {cpu:.2f} CPU-s/s = {cpu * 100 / (rate / 1000):.1f}% of a core per "
        f"1,000 events/s ({where}); the nodes' process {fleet['cpu_s']:.1f} CPU-s in all"
    )
    if "cpu_s" in probe:
        print(
            f"TUI process    : {probe['cpu_s'] / args.seconds:.2f} CPU-s/s, peak RSS "
            f"{probe['peak_rss'] / 2**20:.0f} MB"
        )
    series = ", ".join(
        f"{s[0]:.0f}s {s[2] / 2**20:.0f}" for s in samples[:: max(1, len(samples) // 10)]
    )
    print(
        f"collector RSS  : {series} MB; {ra / 2**20:.0f} MB at {ta:.0f} s -> {rb / 2**20:.0f} MB "
        f"at {tb:.0f} s ({(rb - ra) / 2**20:+.1f} MB)"
    )
    print(
        f"dropped        : {fleet['dropped_frames']} frames by the forwarders, "
        f"{hub.dropped_events} events by the collector's ingest queue; "
        f"{fleet['sent_frames']:,} frames sent, {fleet['connects']} links"
    )
    lat = sorted(probe["latencies"])
    if lat:
        p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
        print(
            f"key press      : {len(lat)} presses (8 s z down escape ? escape 1) answered on "
            f"screen in median {statistics.median(lat) * 1e3:.0f} ms, p95 {p95 * 1e3:.0f} ms, "
            f"max {lat[-1] * 1e3:.0f} ms; {probe['unanswered']} unanswered in 10 s (target < 200)"
        )
        each = ", ".join(
            f"{k} {statistics.median(v) * 1e3:.0f}/{max(v) * 1e3:.0f}"
            for k, v in probe["by_key"].items()
        )
        print(f"  by key       : median/max ms: {each}")
    else:
        print(f"key press      : none answered; {probe['unanswered']} unanswered in 10 s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"conditions     : {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the end; "
        f"the collector's peak RSS {peak:.0f} MB"
    )
    return 0


def compare(argv: list[str]) -> int:
    """Both designs one after the other, each in a fresh interpreter: the TUI in the
    collector's process (as before), then in its own (as perftop collect runs it now)."""
    for tui, title in (("same", "TUI in the collector's process"),
                       ("process", "TUI in a process of its own")):  # fmt: skip
        print(f"--- {title} (--tui {tui})", flush=True)
        rc = subprocess.run([sys.executable, __file__, *argv, "--tui", tui]).returncode
        if rc:
            return rc
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
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds before measuring")
    ap.add_argument("--key-every", type=float, default=1.1, help="seconds between key presses")
    ap.add_argument(
        "--tui",
        choices=("process", "same", "none"),
        default="process",
        help="the TUI in a process of its own (as perftop collect), in the collector's, or none",
    )
    ap.add_argument("--compare", action="store_true", help="--tui same, then --tui process")
    ap.add_argument("--tui-process", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("fd", nargs="?", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compare:
        return compare([a for a in sys.argv[1:] if a != "--compare"])
    if args.tui_process:
        return asyncio.run(tui_process(args, args.fd))
    return asyncio.run(collect(args))


if __name__ == "__main__":
    sys.exit(main())
