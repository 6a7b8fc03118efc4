"""Render the README screenshots from the bundled recording (``screenshots/demo.perftop``).

    python scripts/screenshots.py            # re-render the pictures
    python scripts/screenshots.py --record   # first re-record the demo training

The recording is replayed into a session up to ``--at`` of its events (so the job is still
"running" in the picture), and the real app renders that snapshot: SVG always, PNG too
when a ``resvg`` binary is on PATH (or at $RESVG). The Ranks view's pictures come from a
real 4-rank job's recording on two "nodes", in a hang (``tests/tui/collect_hang.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perftop.cli.launch import probe_sources  # noqa: E402
from perftop.hints.session import hinted_session  # noqa: E402
from perftop.model import Snapshot  # noqa: E402
from perftop.monitor.jobenv import RunConfig  # noqa: E402
from perftop.monitor.runner import Job  # noqa: E402
from perftop.recording import read_events  # noqa: E402
from perftop.tui.app import PerftopApp  # noqa: E402
from perftop.tui.messages import SnapshotMessage  # noqa: E402
from perftop.tui.replay import make_replay  # noqa: E402

OUT = ROOT / "screenshots"
RECORDING = OUT / "demo.perftop"
SHOTS = (  # name, size, keys pressed before the picture
    ("training-160x48", (160, 48), ()),
    ("zoomed-steps-160x48", (160, 48), ("1", "z")),
    ("narrow-80x24", (80, 24), ()),
    ("wide-250x70", (250, 70), ()),
    ("zoomed-hints-160x48", (160, 48), ("6", "z")),
    ("zoomed-hints-80x24", (80, 24), ("6", "z")),
)
RANKS_SHOTS = (  # a 4-rank job on two "nodes", in a hang (tests/tui/collect_hang.py)
    ("ranks-hang-160x48", (160, 48), ()),
    ("zoomed-ranks-160x48", (160, 48), ("8", "z")),
    ("zoomed-ranks-80x24", (80, 24), ("8", "z")),
)
OPS_SHOTS = (  # after a capture (t)
    ("ops-160x48", (160, 48), ()),
    ("ops-80x24", (80, 24), ()),
    ("zoomed-ops-160x48", (160, 48), ("9", "z")),
)


def record() -> None:
    """Run the bundled demo training with its output captured, as the TUI would."""
    cmd = (sys.executable, "-m", "perftop.demo.train", "--steps", "150")
    cfg = RunConfig(cmd, record=RECORDING, force=True, capture_output=True)
    job = Job(cfg, sources=probe_sources(cfg)).start()
    print(f"recorded, exit code {job.wait()}: {RECORDING}")


def captured(path: Path, at: float, then: float) -> Snapshot:
    """The demo replayed to ``at``, a real op capture of the demo's own model (profiled
    here, on this machine: tests/capture_run.py) folded in as its next steps, then the
    demo's events on to ``then`` (the capture's hint has held by then)."""
    import dataclasses
    import tempfile

    import torch

    from perftop.demo.train import Shapes, TinySeg, sync_heavy_loss
    from tests.capture_run import run_capture

    events = list(read_events(path))
    cut, end = int(len(events) * at), int(len(events) * then)
    session = hinted_session()
    session.apply_all(events[:cut])
    snap = session.snapshot()
    pid, first = snap.meta.job_pid or 0, snap.steps.recent[-1].index + 1
    shapes = Shapes(64, slow_transform=False)
    data = [
        tuple(torch.stack(t) for t in zip(*(shapes[i] for i in range(b * 16, b * 16 + 16))))
        for b in range(4)
    ]
    model = TinySeg()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with tempfile.TemporaryDirectory() as tmp:
        rc = run_capture(Path(tmp), first, 3, model, data, sync_heavy_loss, opt)
    shift = (session.last_t or 0.0) - rc.states[0].t
    # Not its "started" state: there the session would take the demo's recorded steps as
    # the capture's baseline, though the capture ran here and now; its cost stays the one
    # measured against its own run's steps before it (the hook's figure).
    for ev in [*(s for s in rc.states if s.state != "started"), rc.ops]:
        session.apply(dataclasses.replace(ev, t=ev.t + shift, pid=pid if ev.pid else 0))
    session.apply_all(events[cut:end])
    return session.snapshot()


def replay(path: Path, at: float) -> Snapshot:
    events = list(read_events(path))
    session = hinted_session()
    session.apply_all(events[: max(1, int(len(events) * at))])
    return session.snapshot()


async def shoot(snap: Snapshot, name: str, size: tuple[int, int], keys: tuple[str, ...]) -> Path:
    app = PerftopApp()
    async with app.run_test(size=size) as pilot:
        app.post_message(SnapshotMessage(snap))
        await pilot.pause()
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
            await pilot.pause()
        return Path(app.save_screenshot(filename=f"{name}.svg", path=str(OUT)))


async def shoot_replay(name: str, size: tuple[int, int], step: int) -> Path:
    """`perftop replay` of the recording, paused at ``step`` (the index read to the end)."""
    app, ctl = make_replay(RECORDING, playing=False)
    async with app.run_test(size=size) as pilot:
        ctl.start()
        try:
            ctl.index.wait(60)
            ctl.command("step", step)
            for _ in range(200):
                await pilot.pause(0.05)
                st = app.replay_state
                if st is not None and st.step == step and st.index_done:
                    break
            await pilot.pause(0.2)
            return Path(app.save_screenshot(filename=f"{name}.svg", path=str(OUT)))
        finally:
            ctl.stop()


def to_png(svg: Path) -> Path | None:
    resvg = os.environ.get("RESVG") or shutil.which("resvg")
    if resvg is None:
        return None
    png = svg.with_suffix(".png")
    fonts = ["--use-fonts-dir", "/usr/share/fonts", "--monospace-family", "DejaVu Sans Mono"]
    subprocess.run(
        [resvg, *fonts, "-z", "1.5", str(svg), str(png)], check=True, stderr=subprocess.DEVNULL
    )
    return png


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", action="store_true", help="re-record the demo first")
    ap.add_argument("--at", type=float, default=0.8, help="fraction of events replayed")
    a = ap.parse_args()
    if a.record or not RECORDING.exists():
        record()
    snap = replay(RECORDING, a.at)
    for name, size, keys in SHOTS:
        svg = asyncio.run(shoot(snap, name, size, keys))
        png = to_png(svg)
        print(svg.relative_to(ROOT), "and " + str(png.relative_to(ROOT)) if png else "")
    snap = captured(RECORDING, a.at, min(1.0, a.at + 0.1))
    for name, size, keys in OPS_SHOTS:
        svg = asyncio.run(shoot(snap, name, size, keys))
        png = to_png(svg)
        print(svg.relative_to(ROOT), "and " + str(png.relative_to(ROOT)) if png else "")
    from tests.tui.collect_hang import mid_hang

    snap, _ = mid_hang()
    for name, size, keys in RANKS_SHOTS:
        svg = asyncio.run(shoot(snap, name, size, keys))
        png = to_png(svg)
        print(svg.relative_to(ROOT), "and " + str(png.relative_to(ROOT)) if png else "")
    for name, size in (("replay-160x48", (160, 48)), ("replay-80x24", (80, 24))):
        svg = asyncio.run(shoot_replay(name, size, 110))
        png = to_png(svg)
        print(svg.relative_to(ROOT), "and " + str(png.relative_to(ROOT)) if png else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
