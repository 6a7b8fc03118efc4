"""The Stacks screen (``k``) of a stall whose process was stopped: its state comes before
its place, so an 80-column screen shows it, and a line under it says what it means."""

from __future__ import annotations

from perftop.events import Hello, StallCapture, Step
from perftop.model import Session
from tests.tui.test_app import aio, settle, showing, text_of


@aio
async def test_a_stopped_process_says_so_before_its_place_at_80_columns() -> None:
    from perftop.tui.screens import StacksScreen
    from perftop.tui.widgets import StacksPanel

    s = Session()
    s.apply(Hello(100.0, 41, 1, "h", ("train.py",)))
    for i in range(10):
        s.apply(Step(41, i, 100.0 + i * 0.1, 100.1 + i * 0.1))
    frames = (("save_checkpoint_to_the_shared_filesystem", "/home/u/project/train.py", 88),)
    s.apply(
        StallCapture(104.0, 41, 10, 3.0, 0.1, ((41, "main", frames),), states=((41, "stopped"),))
    )
    async with showing(s.snapshot(now=104.5), size=(80, 24)) as (app, pilot):
        await pilot.press("k")
        await settle(pilot)
        assert isinstance(app.screen, StacksScreen)
        panel = app.screen.query_one(StacksPanel)
        lines = text_of(panel._body).splitlines()
        (row,) = [ln for ln in lines if ln.startswith("main ")]
        assert row.split()[:3] == ["main", "41", "[stopped]"], lines
        assert row.split()[3].startswith("train.py:88"), lines
        below = lines[lines.index(row) + 1]
        assert below.strip().startswith("stopped (state T: a SIGSTOP") and "kill -CONT 41" in below
        assert len(row) > panel.body_width  # (the place is cut at 80 columns, not the state)
