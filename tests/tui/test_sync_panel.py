"""The Sync panel: sorting by each column, the blocked column only where a run measures
it, and a library site shown as the user's line with the library line after it."""

from __future__ import annotations

import dataclasses

from perftop.model.snapshot import SyncSite
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from tests.tui.fakes import snapshot
from tests.tui.test_app import SIZE, aio, settle, showing, text_of


def column(table, key: str) -> list[str]:
    i = [c.key.value for c in table.ordered_columns].index(key)
    return [table.get_row_at(r)[i].plain for r in range(table.row_count)]


def cpu_snapshot(counts: tuple[int, ...] = (3, 50, 7, 20)):
    """The fake's sites as a CPU run has them (potential, nothing measured), listed in the
    model's order, which is not the order of their counts."""
    snap = snapshot()
    sites = tuple(
        dataclasses.replace(s, kind="potential", blocked_s=None, count=n)
        for s, n in zip(snap.sync, counts)
    )
    return dataclasses.replace(snap, sync=sites)


@aio
async def test_sort_by_total_sorts_by_the_count() -> None:
    async with showing(cpu_snapshot()) as (app, pilot):
        table = app.query_one("#sync").table
        table.sort_by("count", reverse=True)
        await settle(pilot)
        assert column(table, "count") == ["50", "20", "7", "3"]
        table.sort_by("count", reverse=False)
        await settle(pilot)
        assert column(table, "count") == ["3", "7", "20", "50"]


@aio
async def test_blocked_column_on_cuda_runs_only() -> None:
    app = PerftopApp()
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(SnapshotMessage(snapshot()))  # a CUDA run: measured waits
        await settle(pilot)
        table = app.query_one("#sync").table
        assert "blocked" in [c.key.value for c in table.columns.values()]
        table.sort_by("blocked", reverse=True)
        await settle(pilot)
        assert column(table, "blocked") == ["14.2ms", "2.1ms", "N/A", "N/A"]
        # A CPU run: nothing measured (no device to wait for): no column, default sort.
        app.post_message(SnapshotMessage(cpu_snapshot()))
        await settle(pilot)
        assert "blocked" not in [c.key.value for c in table.columns.values()]
        assert table.row_count == 4 and table.sort_column == "per_step"
        assert "N/A" not in text_of(app.query_one("#sync Static"))


@aio
async def test_a_library_site_names_the_users_line_then_the_library() -> None:
    async with showing(snapshot()) as (app, pilot):
        where = column(app.query_one("#sync").table, "where")
        assert "train.py:52 → transformers/trainer.py:1911" in where
        lone = SyncSite("item", "/v/site-packages/lightning/loop.py", 7, "run", "potential", 3, 1.0)
        snap = dataclasses.replace(
            snapshot(), sync=(dataclasses.replace(lone, package="lightning"),)
        )
        app.post_message(SnapshotMessage(snap))
        await settle(pilot)
        assert column(app.query_one("#sync").table, "where") == ["lightning/loop.py:7"]
