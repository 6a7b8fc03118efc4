"""The ``t`` key asks the app's controller for an op capture and shows what it answers,
now and later (from another thread); a read-only viewer says how to allow it."""

from __future__ import annotations

from perftop.flows.watch import ViewerController
from perftop.monitor.hub import Hub
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from tests.tui.fakes import FakeController, snapshot
from tests.tui.test_app import SIZE, aio, settle


def _notes(app: PerftopApp) -> list[str]:
    return [n.message for n in app._notifications]


@aio
async def test_t_asks_the_controller_and_shows_its_answers() -> None:
    app = PerftopApp(FakeController())
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(SnapshotMessage(snapshot()))
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        assert "capturing" in _notes(app)
        assert "asked for 3 steps" in _notes(app)  # told back through a message


@aio
async def test_t_in_a_read_only_viewer_says_how_to_allow_it() -> None:
    app = PerftopApp(ViewerController(Hub()), mode="viewer")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        await settle(pilot)
        (note,) = _notes(app)
        assert "read-only" in note and "--allow-control" in note
