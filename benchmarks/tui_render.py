"""What the TUI's drawing costs per snapshot, in one process, without a job beside it: a
demo recording's snapshots (one each 0.5 s of its time, as the live screen gets them) shown
by the real app at 160x48 (Textual's headless driver), each round in a fresh process; the
thread CPU of the panels' ``show`` and of Textual's compositor per snapshot.

    python benchmarks/tui_render.py [--rounds 7] [--recording FILE] [--tree DIR]

``--tree DIR``: the same rounds with the perftop of another tree (``git archive`` of a
base), interleaved with this one's (A B, B A, ...); each arm's median and the ratio. With no
``--recording``, the demo runs headless for 1,200 steps first to make one (about a minute).
Whole runs (``monitor_cpu.py``) cannot tell apart changes this small from their noise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_S, SHOWN, WARM = 40.0, 120, 10  # from 40 s into the run: the workers' start is over


def snapshots(path: str) -> list:
    from perftop.hints.session import hinted_session
    from perftop.recording import read_events

    session, out, due = hinted_session(), [], None
    for ev in read_events(path, batch=True):
        session.apply(ev)
        t = getattr(ev, "t", None)
        if t is None:
            continue
        due = t + SKIP_S if due is None else due
        if t >= due:
            out.append(session.snapshot())
            due += 0.5
            if len(out) >= SHOWN:
                break
    return out


def child(recording: str) -> dict[str, float]:
    """One round in this process (its ``sys.path`` picks the tree)."""
    import asyncio

    from textual.screen import Screen

    from perftop.tui.app import PerftopApp
    from perftop.tui.messages import SnapshotMessage

    spent = {"show_ms": 0.0, "compositor_ms": 0.0}

    def timed(cls: type, name: str, key: str) -> None:
        real = getattr(cls, name)

        def run(self, *args, **kwargs):
            t = time.thread_time()
            try:
                return real(self, *args, **kwargs)
            finally:
                spent[key] += time.thread_time() - t

        setattr(cls, name, run)

    timed(PerftopApp, "show", "show_ms")
    timed(Screen, "_compositor_refresh", "compositor_ms")
    snaps = snapshots(recording)

    async def show_all() -> None:
        app = PerftopApp()
        async with app.run_test(size=(160, 48)) as pilot:
            for i, snap in enumerate(snaps):
                if i == WARM:
                    spent.update(dict.fromkeys(spent, 0.0))
                app.post_message(SnapshotMessage(snap))
                await pilot.pause()
                await pilot.pause()

    asyncio.run(show_all())
    n = max(1, len(snaps) - WARM)
    return {k: v / n * 1e3 for k, v in spent.items()} | {"snapshots": len(snaps)}


def record(path: str) -> None:
    cmd = [sys.executable, "-m", "perftop", "demo", "--headless", "--steps", "1200"]
    cmd += ["--record", path, "--force"]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def one_round(tree: Path, recording: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, __file__, "--child", recording]
    out = subprocess.run(cmd, env=env, cwd=tree, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--recording")
    ap.add_argument("--tree", type=Path, help="another tree to compare (its perftop/)")
    ap.add_argument("--child", metavar="RECORDING", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        recording = a.recording or os.path.join(tmp, "demo.perftop")
        if not a.recording:
            record(recording)
        arms = {"this": ROOT} | ({"base": a.tree.resolve()} if a.tree else {})
        got: dict[str, list[dict[str, float]]] = {k: [] for k in arms}
        for r in range(a.rounds):
            order = list(arms) if r % 2 == 0 else list(reversed(arms))
            for name in order:
                res = one_round(arms[name], recording)
                got[name].append(res)
                figures = "  ".join(f"{k} {v:.2f}" for k, v in res.items() if k.endswith("ms"))
                print(f"  [{r + 1}/{a.rounds}] {name:<5} {figures}", flush=True)
    print(
        f"\nper snapshot, medians of {a.rounds} rounds ({got['this'][0]['snapshots']:.0f} snapshots)"
    )
    for key in ("show_ms", "compositor_ms"):
        line = f"{key:<14}" + "".join(
            f"  {n} {statistics.median(x[key] for x in runs):.2f}" for n, runs in got.items()
        )
        if a.tree:
            this = statistics.median(x[key] for x in got["this"])
            base = statistics.median(x[key] for x in got["base"])
            line += f"  ratio {this / base:.3f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
