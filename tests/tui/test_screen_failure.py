"""A modal screen is dismissed once, whatever keys arrive in one burst; and a failure of the
app itself is kept (its traceback in a file), never painted or lost. The flows' side (a job
left running, viewers exiting non-zero) is tested in a real terminal: test_e2e_failure."""

from __future__ import annotations

import pytest
from textual import events

from perftop.tui.app import PerftopApp
from perftop.tui.screens import HelpScreen, QuitScreen, StacksScreen
from perftop.tui.screens.seek import SeekScreen
from perftop.tui.widgets import StepsPanel
from tests.tui.fakes import FakeController
from tests.tui.test_app import SIZE, aio, settle


def burst(app: PerftopApp, *keys: str) -> None:
    """Keys as a paste or a lagging terminal delivers them: queued before any is handled."""
    for k in keys:
        app.post_message(events.Key(k, k if len(k) == 1 else None))


@aio
async def test_a_burst_of_keys_closes_help_once() -> None:
    app = PerftopApp()
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(3):
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            burst(app, "a", "b", "c")
            await settle(pilot, 5)
            assert not isinstance(app.screen, HelpScreen) and app.is_running
        assert app.failure is None and len(app.screen_stack) == 1


@pytest.mark.parametrize("make", [HelpScreen, QuitScreen, lambda: StacksScreen(None), SeekScreen])
@aio
async def test_every_modal_is_dismissed_once(make) -> None:
    """Two dismissals (two keys, two clicks) before the first took effect: one result, the
    screen under it stays."""
    chosen: list[object] = []
    app = PerftopApp(FakeController(running=True))
    async with app.run_test(size=SIZE) as pilot:
        screen = make()
        app.push_screen(screen, chosen.append)
        await settle(pilot)
        screen.dismiss("first")
        screen.dismiss("second")
        await settle(pilot)
        assert chosen == ["first"] and len(app.screen_stack) == 1 and app.is_running


@aio
async def test_any_failure_is_kept_with_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self, snap) -> None:
        raise ZeroDivisionError("a panel divided by zero")

    app = PerftopApp()
    with pytest.raises(ZeroDivisionError):  # Pilot re-raises what ended the app
        async with app.run_test(size=SIZE) as pilot:
            monkeypatch.setattr(StepsPanel, "on_click", broken, raising=False)
            await pilot.click(StepsPanel)
            await settle(pilot)
    assert app.failure is not None
    assert app.failure.what == "ZeroDivisionError: a panel divided by zero"
    assert (
        app.failure.saved is not None and "a panel divided by zero" in app.failure.saved.read_text()
    )
    assert app.failure.line.startswith("perftop: the screen failed (ZeroDivisionError")
    assert not app._exit_renderables  # nothing painted over the terminal on the way out
    app.failure.saved.unlink()
