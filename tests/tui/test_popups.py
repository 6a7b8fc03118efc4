"""The help and a hint's evidence fit the screen, or scroll with a visible hint: once the
help showed about ten rows and hid the rest, and ``e`` showed a hint's first line only."""

from __future__ import annotations

import pytest
from textual.containers import VerticalScroll
from textual.widgets import Static

from perftop.tui.screens import HelpScreen
from perftop.tui.screens.evidence import EvidenceScreen
from tests.tui.fakes import snapshot
from tests.tui.test_app import aio, settle, showing, text_of


def fits(app, box: VerticalScroll) -> bool:
    r = box.region
    return r.y >= 0 and r.bottom <= app.size.height and r.x >= 0 and r.right <= app.size.width


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@aio
async def test_help_fits_or_scrolls_saying_so(size) -> None:
    async with showing(snapshot(), size) as (app, pilot):
        await pilot.press("question_mark")
        await settle(pilot)
        box = app.screen.query_one(VerticalScroll)
        assert fits(app, box)
        if box.max_scroll_y == 0:  # all of it shown
            assert box.virtual_size.height <= box.content_region.height
            return
        assert "more below" in str(box.border_subtitle)
        await pilot.press("pagedown", "pagedown", "end")  # scroll keys scroll, never close
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert box.scroll_y == box.max_scroll_y and "more below" not in str(box.border_subtitle)
        await pilot.press("x")
        await settle(pilot)
        assert not isinstance(app.screen, HelpScreen)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@aio
async def test_evidence_shows_the_whole_hint(size) -> None:
    snap = snapshot()
    hint = snap.hints[0]
    async with showing(snap, size) as (app, pilot):
        await pilot.press("e")
        await settle(pilot)
        assert isinstance(app.screen, EvidenceScreen)
        box = app.screen.query_one(VerticalScroll)
        assert fits(app, box) and box.max_scroll_y == 0  # this hint fits whole
        shown = " ".join(text_of(app.screen.query_one(Static)).split())
        for line in (hint.title, *hint.evidence, *hint.advice):
            assert " ".join(line.split()) in shown, line
        assert "Sync panel" in shown
        assert app.screen_stack[0].focused is not None  # the proving panel, under the box
        await pilot.press("e")  # the next hint (here: the same one, the only one)
        await settle(pilot)
        assert isinstance(app.screen, EvidenceScreen) and len(app.screen_stack) == 2
