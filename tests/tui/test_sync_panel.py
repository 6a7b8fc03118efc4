"""The Sync panel: sorting by each column, the blocked column only where a run measures
it, and a library site shown as the user's line with the library line after it."""

from __future__ import annotations

import dataclasses

from perftop.model.snapshot import SyncSite, SyncWatch
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from perftop.tui.widgets.sync import squeeze
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
        # cut in the middle to the panel's width (the whole place is the report's)
        assert [w for w in where if w.startswith("train.py:52 → ")][0].endswith(":1911")
        lone = SyncSite("item", "/v/site-packages/lightning/loop.py", 7, "run", "potential", 3, 1.0)
        snap = dataclasses.replace(
            snapshot(), sync=(dataclasses.replace(lone, package="lightning"),)
        )
        app.post_message(SnapshotMessage(snap))
        await settle(pilot)
        assert column(app.query_one("#sync").table, "where") == ["lightning/loop.py:7"]


@aio
async def test_rates_with_their_error_and_what_they_rest_on() -> None:
    """A sampled rate with its standard error, one seen in few watched steps as '~1 in N',
    the watched steps in the border; the exact mode says so and shows no error."""
    sampled = (
        SyncSite("item", "/u/t.py", 9, "f", "potential", 40, 1.0, watched=40, error=0.0, seen=38),
        SyncSite("item", "/u/t.py", 12, "f", "potential", 80, 0.1, watched=40, error=0.02, seen=4),
        SyncSite("bool", "/u/t.py", 15, "f", "potential", 9, 0.25, watched=40, error=0.05, seen=12),
    )
    sampled = (dataclasses.replace(sampled[0], error=0.1), *sampled[1:])
    async with showing(dataclasses.replace(snapshot(), sync=sampled)) as (app, pilot):
        panel = app.query_one("#sync")
        assert column(panel.table, "per_step") == ["1.0 ±0.10", "0.25 ±0.05", "~1 in 10"]
        assert panel.border_subtitle == "3 sites, 40 steps watched"
        exact = tuple(dataclasses.replace(s, error=0.0, watched=99, exact=True) for s in sampled)
        app.post_message(SnapshotMessage(dataclasses.replace(snapshot(), sync=exact)))
        await settle(pilot)
        assert column(panel.table, "per_step") == ["1.0", "0.25", "0.10"]
        assert panel.border_subtitle == "3 sites, exact: 99 steps"


def test_a_place_is_cut_in_the_middle_never_losing_the_users_line() -> None:
    lib = "ignite/engine/a_long_module_name_of_the_engine.py:1069"
    assert squeeze("train.py:52", lib, 80) == f"train.py:52 → {lib}"
    assert squeeze("train.py:52", lib, 40) == "train.py:52 → …ame_of_the_engine.py:1069"
    assert squeeze("train.py:52", lib, 24) == "train.py:52 → …e.py:1069"
    assert squeeze("train.py:52", lib, 20) == "train.py:52 → …:1069"
    assert squeeze("train.py:52", lib, 16) == f"train.py:52 → {lib}"  # the table scrolls
    assert squeeze("a.py:1, b.py:2 +3", "", 12) == "…, b.py:2 +3"


@aio
async def test_sites_one_line_reaches_through_a_library_differ_in_the_panel() -> None:
    """Two sites of one user line through one library file, at two of its lines: their
    places are cut in the middle to the panel's width, never at its right edge (which
    made them read alike), and each ends with its library line."""
    base = SyncSite("item", "/home/u/train.py", 52, "train", "potential", 9, 1.0)
    lib = "/v/site-packages/ignite/engine/a_long_module_name_of_the_engine.py"
    sites = tuple(
        dataclasses.replace(base, lib_file=lib, lib_line=n, package="ignite", count=c)
        for n, c in ((1069, 9), (1077, 8))
    )
    app = PerftopApp()
    async with app.run_test(size=(200, 50)) as pilot:
        app.post_message(SnapshotMessage(dataclasses.replace(snapshot(), sync=sites)))
        await settle(pilot)
        table = app.query_one("#sync").table
        where = column(table, "where")
        assert [w[-4:] for w in where] == ["1069", "1077"], where
        assert all(w.startswith("train.py:52 → …") for w in where), where
        drawn = sum(c.get_render_width(table) for c in table.columns.values())
        assert drawn <= table.scrollable_content_region.width, (drawn, where)


@aio
async def test_no_site_is_no_all_clear_where_detection_paused() -> None:
    """torch.compile stopped the detector: the panel says so, with the steps it watched,
    instead of "no host-device syncs seen" alone."""
    why = "torch.compile is in use (a compiled model)"
    for watch, said in (
        (SyncWatch(0, why), ["no host↔device syncs seen", f"detection paused: {why}"]),
        (SyncWatch(12, why), ["no host↔device syncs seen in 12 watched steps", "paused"]),
        (SyncWatch(1, ""), ["no host↔device syncs seen in 1 watched step"]),
    ):
        snap = dataclasses.replace(snapshot(), sync=(), sync_watch=watch)
        async with showing(snap) as (app, pilot):
            shown = text_of(app.query_one("#sync").summary)
            assert all(s in shown for s in said), shown
            assert ("paused" in shown) == bool(watch.paused), shown
    paused = dataclasses.replace(cpu_snapshot(), sync_watch=SyncWatch(40, why))
    async with showing(paused) as (app, pilot):
        assert app.query_one("#sync").border_subtitle.endswith("· detection paused")


@aio
async def test_passes_with_no_sync_listed_say_how_many_were_watched() -> None:
    """A torchrl PPO's rollouts never fit a pass watch's budget: no sync was listed between
    steps and nothing said so. The subtitle says how many passes were watched whole."""
    from perftop.model.snapshot import BetweenRow

    rollouts = (BetweenRow("rollout", 32.5, 19), BetweenRow("checkpoint", 1.0, 2))
    for watch, want in ((SyncWatch(5, "", 0), "0 of 19 passes watched"),
                        (SyncWatch(5, "", 2), "2 of 19 passes watched")):  # fmt: skip
        snap = dataclasses.replace(
            cpu_snapshot(), between=rollouts, passes_run=19, sync_watch=watch
        )
        async with showing(snap) as (app, pilot):
            assert app.query_one("#sync").border_subtitle.endswith(f"· {want}")
        empty = dataclasses.replace(snap, sync=())
        async with showing(empty) as (app, pilot):
            assert app.query_one("#sync").border_subtitle == want
