"""Work nobody sees is not done: a panel whose text did not change is not repainted, and
panels zoomed away are not updated until they are shown again."""

from __future__ import annotations

import dataclasses

from perftop.tui.messages import SnapshotMessage
from perftop.tui.widgets import (
    HeaderBar,
    HintsPanel,
    HostPanel,
    ProcessesPanel,
    StepsPanel,
    SyncPanel,
)
from tests.tui.fakes import snapshot
from tests.tui.test_app import aio, settle, showing, text_of


def spy(widget) -> list[dict]:
    """The calls of ``widget.refresh`` from now on (their keyword arguments)."""
    calls: list[dict] = []
    real = widget.refresh

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    widget.refresh = counted
    return calls


@aio
async def test_a_panel_whose_text_is_unchanged_is_not_repainted() -> None:
    snap = snapshot()
    async with showing(snap) as (app, pilot):
        host, hints = app.query_one(HostPanel), app.query_one(HintsPanel)
        sync = app.query_one(SyncPanel)
        header = app.query_one(HeaderBar)
        procs = app.query_one(ProcessesPanel)  # its subtitle is set again, the same
        assert procs.border_subtitle
        watched = (host._body, hints._body, sync.summary, header, procs, sync)
        spied = {w: spy(w) for w in watched}
        app.post_message(SnapshotMessage(snap))  # the same figures again
        await settle(pilot)
        assert {type(w).__name__: c for w, c in spied.items() if c} == {}
        busier = dataclasses.replace(snap.host, cpu_percent=(snap.host.cpu_percent or 0) + 7)
        app.post_message(SnapshotMessage(dataclasses.replace(snap, host=busier)))
        await settle(pilot)
        assert spied[host._body] == [{"layout": False}]  # as many lines: no new layout
        assert spied[hints._body] == [] and spied[header] == []
        assert f"CPU {busier.cpu_percent:.0f}%" in text_of(host._body)


@aio
async def test_panels_zoomed_away_are_not_updated_until_shown_again() -> None:
    async with showing(snapshot(steps=10)) as (app, pilot):
        steps, host = app.query_one(StepsPanel), app.query_one(HostPanel)
        await pilot.press("z")
        assert app.screen.maximized is steps
        app.post_message(SnapshotMessage(snapshot(steps=20)))
        await settle(pilot)
        assert steps._last is not None and steps._last.steps.count == 1254
        assert host._last is not None and host._last.steps.count == 1244  # not drawn, not updated
        await pilot.press("escape")
        await settle(pilot)
        assert host._last is not None and host._last.steps.count == 1254  # caught up
