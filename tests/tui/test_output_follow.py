"""The Output panel follows the job's newest line unless the user scrolled up, and after any
resize: once, 160x48 -> 80x24 -> 160x48 left it on an old line for good."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from perftop.model.snapshot import OutputLine
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from perftop.tui.widgets import OutputPanel
from tests.tui.fakes import snapshot
from tests.tui.test_app import aio, settle
from tests.tui.test_resize import ROOT

TMUX = shutil.which("tmux")
BASE = snapshot()


def lines(n: int):
    out = tuple(OutputLine(0.0, "stdout", f"tick {i}") for i in range(max(0, n - 200), n))
    return dataclasses.replace(BASE, output=out, output_total=n)


@aio
async def test_follows_after_resizes_until_the_user_scrolls_up() -> None:
    app = PerftopApp()
    n = 0
    async with app.run_test(size=(160, 48)) as pilot:
        log = app.query_one(OutputPanel).log_view

        async def more() -> None:
            nonlocal n
            for _ in range(6):
                n += 5
                app.post_message(SnapshotMessage(lines(n)))
                await settle(pilot, 2)

        for size in ((80, 24), (160, 48), (200, 50), (80, 24)):
            await pilot.resize_terminal(*size)
            await more()
            assert log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y, size
        log.focus()
        await pilot.press("pageup")
        await more()
        held = log.scroll_y
        assert held < log.max_scroll_y  # the user reads: new lines do not move the view
        await pilot.resize_terminal(160, 48)
        await more()
        assert log.scroll_y < log.max_scroll_y
        await pilot.press("end")
        await more()
        assert log.scroll_y == log.max_scroll_y  # follows again


@pytest.mark.skipif(TMUX is None, reason="tmux not installed")
def test_output_follows_after_a_live_resize_in_tmux(tmp_path) -> None:
    """60 lines (more than the panel holds), then nothing until the terminal is 80x24 and
    laid out, then a line every 0.1 s: the first lines written after the shrink once found
    the view "scrolled up" and it stayed there, also back at 160x48."""
    name = f"pt-follow-{uuid.uuid4().hex[:6]}"
    go = tmp_path / "go"
    ticker = (
        "import itertools, os, sys, time\n"
        "for i in range(60): print('tick', i, flush=True)\n"
        "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
        "for i in itertools.count(60):\n print('tick', i, flush=True); time.sleep(0.1)"
    )
    cmd = shlex.join([sys.executable, "-m", "perftop", "run", "--no-record", "--refresh", "0.25",
                      sys.executable, "-c", ticker, str(go)])  # fmt: skip

    def newest(above: int, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        seen = -1
        while time.monotonic() < deadline:
            screen = subprocess.run([TMUX or "tmux", "capture-pane", "-p", "-t", f"={name}:"],
                                    capture_output=True, text=True).stdout  # fmt: skip
            seen = max((int(t) for t in re.findall(r"tick (\d+)", screen)), default=-1)
            if seen > above:
                return seen
            time.sleep(0.3)
        raise AssertionError(f"the Output panel stayed at tick {seen} (wanted past {above})")

    def resize(w: int, h: int) -> None:
        subprocess.run([TMUX or "tmux", "resize-window", "-t", f"={name}:", "-x", str(w),
                        "-y", str(h)], check=True)  # fmt: skip

    subprocess.run([TMUX or "tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "48",
                    "-c", ROOT, cmd], check=True)  # fmt: skip
    pane = int(subprocess.run([TMUX or "tmux", "display", "-p", "-t", f"={name}:", "#{pane_pid}"],
                              capture_output=True, text=True).stdout.strip() or 0)  # fmt: skip
    try:
        newest(58, timeout=60.0)  # all 60 shown: followed to the end
        resize(80, 24)
        time.sleep(1.5)  # laid out at the new size before the next line comes
        go.touch()
        newest(80)  # at 80x24: the new lines are followed
        resize(160, 48)
        now = newest(80)
        newest(now + 20)  # and back at 160x48
    finally:
        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(pane).children(recursive=True):
                p.kill()
        subprocess.run([TMUX or "tmux", "kill-session", "-t", f"={name}"], capture_output=True)


@aio
async def test_a_flood_is_counted_not_rendered() -> None:
    """A job printing 50,000 lines/s: each snapshot brings 25,000 new lines, of which the
    model keeps 2,000; the panel renders the newest few and counts the rest, so that the
    app's loop (and every key) never waits on thousands of lines."""
    from perftop.tui.widgets.output import RENDER_LINES

    app = PerftopApp()
    async with app.run_test(size=(160, 48)) as pilot:
        panel = app.query_one(OutputPanel)
        log = panel.log_view
        n = 0
        for _ in range(3):
            before = len(log.lines)
            n += 25_000
            flood = dataclasses.replace(
                BASE,
                output=tuple(OutputLine(0.0, "stdout", f"tick {i}") for i in range(n - 2000, n)),
                output_total=n,
            )
            app.post_message(SnapshotMessage(flood))
            await settle(pilot)
            assert len(log.lines) - before <= RENDER_LINES + 1  # the newest, and one count
        assert log.lines[-1].text == f"tick {n - 1}"  # the newest line is there, followed
        assert log.scroll_y == log.max_scroll_y
        hidden = 3 * 25_000 - 3 * RENDER_LINES
        assert f"{n:,} lines ({hidden:,} not shown)" in str(panel.border_subtitle)
        assert any(f"{25_000 - RENDER_LINES:,} lines not shown" in s.text for s in log.lines)


@aio
async def test_new_lines_scroll_the_log_without_laying_the_screen_out() -> None:
    """A job that prints at each step: its new lines move the log's scrollbar and end, and
    the screen is not laid out again for them (it was, at every snapshot: the whole screen
    laid out and drawn twice). The first line past the log's height shows its scrollbar,
    placed on the screen (the text's room narrows by it)."""
    app = PerftopApp()
    async with app.run_test(size=(160, 48)) as pilot:
        log = app.query_one(OutputPanel).log_view
        app.post_message(SnapshotMessage(lines(2)))
        await settle(pilot)
        screen, real = app.screen, app.screen._refresh_layout
        laid: list[int] = []

        def counted(*args, **kwargs):
            laid.append(1)
            return real(*args, **kwargs)

        screen._refresh_layout = counted  # type: ignore[method-assign]
        app.post_message(SnapshotMessage(lines(60)))  # past the log's height: a bar
        await settle(pilot)
        bar = log.vertical_scrollbar
        assert log.show_vertical_scrollbar and bar.region.width == 1 and bar.region.height > 5
        assert log.scrollable_content_region.width == log.region.width - 1
        for n in range(65, 100, 5):
            laid.clear()
            app.post_message(SnapshotMessage(lines(n)))
            await settle(pilot)
            assert laid == [], n
            assert log.virtual_size.height == len(log.lines) == n
            assert log.vertical_scrollbar.window_virtual_size == n  # the bar's thumb moved
            assert log.scroll_y == log.max_scroll_y > 0  # at the end
            drawn = ["".join(s.text for s in strip) for strip in log.render_lines(log.size.region)]
            assert any(f"tick {n - 1}" in line for line in drawn)
