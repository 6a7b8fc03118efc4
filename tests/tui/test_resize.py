"""A live resize lays out like a fresh start at the new size: in a real terminal (tmux
``resize-window``) and with the Pilot. Once, a resize applied the old size's layout and
dropped the Processes, Sync and Hints panels and the Output panel's border."""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from tests.tui.fakes import snapshot
from tests.tui.test_app import aio, settle

TMUX = shutil.which("tmux")
ROOT = str(Path(__file__).resolve().parents[2])  # this checkout's perftop, not an installed one
SIZES = ((200, 50), (80, 24), (160, 48))
PILOT_SIZES = (*SIZES, (60, 24), (70, 24))  # and thinner than two side columns, or not
TITLES = ("Steps", "GPU", "Host", "Processes / Workers", "Sync", "Hints", "Output")
BOX = re.compile(r"[╭╮╰╯│]")
TITLE = re.compile(r"[╭─]─ ([^─│╮]+?) ─")


def _tmux(*args: str) -> str:
    return subprocess.run([TMUX or "tmux", *args], capture_output=True, text=True).stdout


def skeleton(screen: str) -> tuple[tuple[int, str, tuple[int, ...]], ...]:
    """Where the boxes are: per row, the columns of the border characters and the panel
    titles on it; figures (which differ between two runs) are left out."""
    rows = screen.split("\n")
    return tuple(
        (y, " ".join(TITLE.findall(row)), tuple(m.start() for m in BOX.finditer(row)))
        for y, row in enumerate(rows)
    )


def settled(name: str, timeout: float = 30.0, want: tuple | None = None) -> str:
    """The screen once its boxes stop moving (and match ``want``, if given)."""
    deadline = time.monotonic() + timeout
    last, screen = None, ""
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", f"={name}:")
        sk = skeleton(screen)
        if "─ Output ─" in screen and sk == last and (want is None or sk == want):
            return screen
        last = sk
        time.sleep(0.3)
    return screen


@pytest.mark.skipif(TMUX is None, reason="tmux not installed")
def test_resize_in_tmux_matches_fresh_starts() -> None:
    tag = uuid.uuid4().hex[:6]
    # A shell that exports COLUMNS and LINES (pytest does too): stale after any resize, and
    # Textual's own size query prefers them; perftop asks the terminal.
    cmd = shlex.join(["env", "COLUMNS=100", "LINES=30", sys.executable, "-m", "perftop",
                      "run", "--no-record", "sleep", "90"])  # fmt: skip
    names = {"resized": (f"pt-rs-{tag}-r", SIZES[0])}
    names |= {f"{w}x{h}": (f"pt-rs-{tag}-{w}", (w, h)) for w, h in SIZES}
    owned: list[psutil.Process] = []
    try:
        for name, (w, h) in names.values():
            _tmux("new-session", "-d", "-s", name, "-x", str(w), "-y", str(h), "-c", ROOT, cmd)
        fresh = {}
        for key, (name, _) in names.items():
            screen = settled(name)
            pane = int(_tmux("display", "-p", "-t", f"={name}:", "#{pane_pid}").strip() or 0)
            with contextlib.suppress(psutil.Error):
                owned += psutil.Process(pane).children(recursive=True)
            for title in TITLES:
                assert f"─ {title} ─" in screen, f"{key} fresh start has no {title}:\n{screen}"
            fresh[key] = screen
        name = names["resized"][0]
        for w, h in SIZES[1:] + SIZES[:1]:
            _tmux("resize-window", "-t", f"={name}:", "-x", str(w), "-y", str(h))
            want = fresh[f"{w}x{h}"]
            got = settled(name, timeout=10, want=skeleton(want))
            assert skeleton(got) == skeleton(want), f"resized to {w}x{h}:\n{got}\nfresh:\n{want}"
    finally:
        for p in owned:  # perftop and its job: killed, so that nothing is left running
            with contextlib.suppress(psutil.Error):
                p.kill()
        for name, _ in names.values():
            _tmux("kill-session", "-t", f"={name}")


def _layout(app: PerftopApp) -> dict[str, tuple]:
    main = app.screen_stack[0]
    return {
        str(p.id): (p.region, p.display, p.compact)
        for p in main.query("#body > *")
        if hasattr(p, "compact")
    }


@aio
async def test_resize_with_pilot_matches_fresh_starts() -> None:
    fresh = {}
    for size in PILOT_SIZES:
        app = PerftopApp()
        async with app.run_test(size=size) as pilot:
            app.post_message(SnapshotMessage(snapshot()))
            await settle(pilot)
            fresh[size] = _layout(app)
    app = PerftopApp()
    async with app.run_test(size=SIZES[0]) as pilot:
        app.post_message(SnapshotMessage(snapshot()))
        await settle(pilot)
        for size in (*PILOT_SIZES[1:], SIZES[0]):
            await pilot.resize_terminal(*size)
            await settle(pilot, 5)
            assert _layout(app) == fresh[size], size
        await pilot.press("question_mark")  # resized under the help screen too
        await pilot.resize_terminal(*SIZES[1])
        await settle(pilot, 5)
        await pilot.press("escape")
        await settle(pilot)
        assert _layout(app) == fresh[SIZES[1]]


@aio
async def test_a_thin_terminal_keeps_half_of_it_for_the_steps() -> None:
    """Under 68 columns the side column (34 wide from 68 to 119) would squeeze the Steps
    panel, the one the user came for: the two columns share the width."""
    for width, steps_at_least in ((60, 30), (50, 25), (70, 36)):
        app = PerftopApp()
        async with app.run_test(size=(width, 24)) as pilot:
            app.post_message(SnapshotMessage(snapshot()))
            await settle(pilot)
            layout = _layout(app)
            steps, gpu = layout["steps"][0], layout["gpu"][0]
            assert steps.width >= steps_at_least and steps.width >= gpu.width, layout
