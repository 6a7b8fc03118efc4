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


@aio
async def test_a_narrow_key_bar_leaves_out_the_palette_key_not_capture() -> None:
    """At 80 columns the command palette's key on the right cut "t capture" to "t ca";
    it is left out below 90 columns (ctrl+p still opens the palette), back when wider."""
    async with showing(snapshot(), size=(80, 24)) as (app, pilot):
        footer = app.query_one(KeysFooter)
        keys = {k.key: k for k in footer.query(FooterKey)}
        assert "t" in keys and not footer.show_command_palette
        assert keys["t"].region.right <= 80 and keys["t"].description == "capture"
        await pilot.resize_terminal(120, 30)
        await settle(pilot)
        assert app.query_one(KeysFooter).show_command_palette
