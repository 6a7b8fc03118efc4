"""The Ranks view's collectives, from a real recording: `perftop run --record` of
tests/workloads/ddp_comm.py under `torchrun --standalone --nproc_per_node=4` (MODE=slow
STEPS=12 DELAY=0.05: rank 1 sleeps before each backward). The rank under the table's
cursor shows its wait at the collectives in one line, and zoomed, each site that launched
them, with the figures the report gives for that rank."""

from __future__ import annotations

from pathlib import Path

from textual.geometry import Region

from perftop.report.build import build_report, session_from_file
from perftop.report.comm import site_texts, sites_of
from perftop.tui import fmt
from perftop.tui.messages import SnapshotMessage
from perftop.tui.widgets import RanksPanel
from tests.tui.collect_hang import mid_hang
from tests.tui.test_app import aio, settle, showing, text_of

RECORDING = Path(__file__).parent / "recordings" / "ddp4.perftop"


def recorded():
    snap = session_from_file(str(RECORDING)).snapshot()
    return snap, {r["rank"]: r for r in build_report(snap)["ranks"]}


def on_screen(widget) -> str:
    """The first line of ``widget`` as the screen shows it (cut to its width)."""
    return widget.render_lines(Region(0, 0, widget.size.width, 1))[0].text


def rows(panel: RanksPanel) -> dict[tuple[str, str, str], list[str]]:
    """The collectives table: (op, phase, call) -> the cells' text."""
    t = panel.colls.table
    cols = [str(c.value) for c in t.columns]
    out = {}
    for k in t.rows:
        cells = dict(zip(cols, (t.get_cell(k, c).plain for c in cols)))
        out[(cells["op"], cells["phase"], cells["call"])] = [cells[c] for c in cols]
    return out


@aio
async def test_each_ranks_collectives_with_phase_line_and_wait_160x48() -> None:
    snap, ranks = recorded()
    async with showing(snap, (160, 48)) as (app, pilot):
        panel = app.query_one(RanksPanel)
        line = on_screen(panel.colls.line)  # not zoomed: one line, the heaviest site first
        assert line.startswith("rank 0: all_reduce in backward at ddp_comm.py:42 <module>"), line
        assert not panel.colls.table.display
        await pilot.press("8", "z")  # the ranks table focused, zoomed: the sites
        await settle(pilot)
        assert panel.colls.table.display
        for rank in (0, 1):
            r = ranks[rank]
            line = on_screen(panel.colls.line)
            wait = f"exposed comm wait {fmt.secs(r['comm_wait_s'])}/step"
            assert line.startswith(f"rank {rank}: {wait} {r['comm_exposed_fraction']:.0%}"), line
            assert f"overlapped {fmt.secs(r['comm_overlap_s'])}" in line
            got = rows(panel)
            want = {}
            for c in r["collectives"]:
                for s in sites_of(c):
                    where, op, pg, phase, call, count, per, nb = site_texts(c, s, r["steps"])
                    cells = [op, phase, count, per, nb, fmt.secs(c["wait_p50_s"]), where, pg, call]
                    want[(op, phase, call)] = cells
            assert got == want
            # DDP's buckets from backward (C++, no call) at loss.backward(); the metric's
            # all_reduce and the logging barrier in the step, at their lines
            assert got[("all_reduce", "backward", "-")][6] == "ddp_comm.py:42 <module>"
            assert got[("all_reduce", "step", "all_reduce")][6] == "ddp_comm.py:52 <module>"
            assert got[("barrier", "step", "barrier")][6] == "ddp_comm.py:54 <module>"
            assert int(got[("all_reduce", "backward", "-")][2]) >= 4 * 11
            await pilot.press("down")  # the next rank
            await settle(pilot)
        assert ranks[0]["comm_waited_for_rank"] == 1 and ranks[1]["comm_straggler"]
        await pilot.press("up", "up")
        await settle(pilot)
        assert "waits for rank 1" in on_screen(panel.colls.line)
        await pilot.press("escape")  # unzoomed: the line again
        await settle(pilot)
        assert not panel.colls.table.display
        assert on_screen(panel.colls.line).startswith("rank 0: all_reduce in backward")


@aio
async def test_the_collectives_fit_80x24() -> None:
    """Narrow and short: the Ranks panel keeps its room for the ranks; zoomed, the
    figures and the user's line fit in 80 columns."""
    snap, _ = recorded()
    async with showing(snap, (80, 24)) as (app, pilot):
        panel = app.query_one(RanksPanel)
        assert panel.display and not panel.colls.display  # compact: the ranks only
        await pilot.press("8", "z")
        await settle(pilot)
        t = panel.colls.table
        key = next(k for k in t.rows if t.get_cell(k, "phase").plain == "backward")
        y = t.get_row_index(key) + 1
        shown = t.render_line(y).text
        assert "all_reduce" in shown and "backward" in shown and "ddp_comm.py:42" in shown, shown


@aio
async def test_a_hang_says_who_never_entered_and_where_it_stands() -> None:
    during, after = mid_hang()
    async with showing(during, (160, 48)) as (app, pilot):
        panel = app.query_one(RanksPanel)
        line = text_of(panel.colls.line).strip()
        (h,) = [h for h in during.comm.hangs if h.ongoing]
        assert line == (
            f"HANG {h.waited_s:.0f} s: rank 3 at train4.py:42 main never entered all_reduce "
            f"default_pg seq {h.seq} · the others wait at train4.py:43 main"
        ), line
        assert on_screen(panel.colls.line).startswith(  # where the missing rank stands
            f"HANG {h.waited_s:.0f} s: rank 3 at train4.py:42 main never entered all_reduce"
        )
        assert {r.host for r in during.ranks} == {"n1", "n2"}
        app.post_message(SnapshotMessage(after))  # the job went on and ended: no hang now
        await settle(pilot)
        assert text_of(panel.colls.line).startswith("rank 0: all_reduce in backward")
    async with showing(during, (80, 24)) as (app, pilot):  # compact: the hang line stays
        panel = app.query_one(RanksPanel)
        assert panel.colls.display and panel.colls.line.size.width > 0
        assert on_screen(panel.colls.line).startswith("HANG"), on_screen(panel.colls.line)
        # a rank's row under the table's header: no scrollbar takes its line (the table
        # scrolls sideways by its keys), so a hang at 80x24 still shows ranks
        table = panel.table
        assert table.scrollable_content_region.height == table.outer_size.height == 2
        app.post_message(SnapshotMessage(after))
        await settle(pilot)
        assert not panel.colls.display  # no hang: the room is the ranks'
        assert table.scrollable_content_region.height == 3  # the header and two ranks


@aio
async def test_the_stacks_of_a_hang_show_who_never_entered_first() -> None:
    """`k` in a hang: the rank that never entered, first, with the stack its own node
    dumped; the latest capture here is the other node's, of the ranks that wait."""
    from perftop.tui.screens import StacksScreen
    from perftop.tui.widgets import StacksPanel

    during, _ = mid_hang()
    assert during.stalls[-1].host == "n1" and during.stalls[-1].during == "collective"
    async with showing(during, (160, 48)) as (app, pilot):
        await pilot.press("k")
        await settle(pilot)
        assert isinstance(app.screen, StacksScreen)
        lines = text_of(app.screen.query_one(StacksPanel)._body).splitlines()
        (h,) = [h for h in during.comm.hangs if h.ongoing]
        assert lines[1].strip() == f"never entered all_reduce default_pg seq {h.seq}:"
        assert lines[2].split() == ["rank", "3", str(h.missing[0].pid), "n2", "train4.py:42",
                                    "main"]  # fmt: skip
        assert lines[3].strip() == "train4.py:42 main"
