"""The key bar keeps no dead key widgets: focus changes recompose it, and Textual alone
would keep every old key widget bound to the footer (memory without bound)."""

from __future__ import annotations

from textual.widgets._footer import FooterKey

from perftop.tui.widgets.footer import KeysFooter
from tests.tui.fakes import snapshot
from tests.tui.test_app import aio, settle, showing


@aio
async def test_focus_changes_leave_the_footer_bound_to_its_own_keys_only() -> None:
    async with showing(snapshot()) as (app, pilot):
        footer = app.query_one(KeysFooter)
        for _ in range(10):
            await pilot.press("4", "1")  # processes, steps: the bindings change twice
            await settle(pilot)
        keys = len(footer.query(FooterKey))
        assert keys > 0
        assert footer.watcher_count() <= keys + 1  # the keys shown now (and the footer)
