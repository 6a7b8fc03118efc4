"""The Ranks table: shown only for more than one rank, the straggler marked, rows of
nodes that share a pid kept apart."""

from __future__ import annotations

import dataclasses

from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from perftop.events import Hello, Note, Step
from perftop.model import Session
from perftop.model.fleet import FleetSession
from perftop.model.snapshot import ProcessRole, ProcRow, Snapshot, StepStats
from perftop.tui import fmt
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from perftop.tui.widgets import ProcessesPanel, RanksPanel, processes, ranks
from perftop.tui.widgets.difftable import DiffTable
from perftop.wire import (
    DATA_WAIT_NOTE,
    HEADER,
    Frame,
    decode_frame,
    encode_frame,
    encode_node_frame,
)
from tests.tui.fakes import snapshot
from tests.tui.test_app import aio, settle, showing, text_of


def two_nodes_same_pid():
    """Rank 1 (on n2) loads data slowly; rank 0 (on n1) waits for it in backward."""
    s = FleetSession()
    for node, rank, own, bwd in (("n1", 0, 0.002, 0.032), ("n2", 1, 0.032, 0.002)):
        evs = [Hello(1.0, 100, 1, "h", ("t",), rank, rank, 2)] + [
            Step(100, i, 1.0 + i, 1.0 + i + own + bwd, data=own - 0.001, backward=bwd)
            for i in range(10)
        ]
        data = encode_frame(evs)
        s.apply_all(decode_frame(encode_node_frame(node, Frame(0, data[HEADER.size :])))[0])
    return s.snapshot()


@aio
async def test_one_hosts_straggler_is_named_without_its_host() -> None:
    """The same two ranks on one host (a local torchrun): the subtitle names the straggler
    by its rank alone ("rank 1 on vm" named the only host there is, and cut the subtitle
    at 160x48); across nodes it names the node (the test above)."""
    s = Session()
    for rank, own, bwd in ((0, 0.002, 0.032), (1, 0.032, 0.002)):
        s.apply(Hello(1.0, 100 + rank, 1, "vm", ("t",), rank, rank, 2))
        s.apply_all(Step(100 + rank, i, 1.0 + i, 1.0 + i + own + bwd, data=own - 0.001,
                         backward=bwd) for i in range(10))  # fmt: skip
    async with showing(snapshot()) as (app, pilot):
        app.post_message(SnapshotMessage(s.snapshot()))
        await settle(pilot)
        sub = str(app.query_one(RanksPanel).border_subtitle)
        assert sub.startswith("2 ranks · rank 1 makes the others wait"), sub


@aio
async def test_ranks_table_marks_the_straggler_and_keeps_hosts_apart() -> None:
    async with showing(snapshot()) as (app, pilot):
        panel = app.query_one(RanksPanel)
        assert not panel.display  # one process: no ranks table
        app.post_message(SnapshotMessage(two_nodes_same_pid()))
        await settle(pilot)
        assert panel.display and app.query_one("#body").has_class("-ranks")
        table = panel.table
        assert sorted(k.value for k in table.rows) == ["n1:100", "n2:100"]
        assert table.get_cell("n2:100", "rank").plain == "1 ◀ straggler"
        assert table.get_cell("n1:100", "rank").plain == "0"
        assert "rank 1 on n2 makes the others wait" in str(panel.border_subtitle)
        procs = app.query_one(ProcessesPanel).table
        assert sorted(k.value for k in procs.rows) == ["n1:100", "n2:100"]
        assert procs.get_cell("n2:100", "role").plain == "n2 rank 1"


def many_ranks(scale: int) -> Snapshot:
    """Three ranks whose step counts are ``scale`` times 1, 2 and 3."""
    ranks = tuple(
        StepStats(pid=100 + r, rank=r, count=scale * (r + 1), p50=0.1, host="h") for r in range(3)
    )
    return dataclasses.replace(snapshot(), ranks=ranks)


@aio
async def test_ranks_columns_fit_their_widest_cell_as_figures_grow_and_shrink() -> None:
    """The table sizes a column it patched from its widest cell (the label at least), as
    Textual's own measuring would, when the figures get wider and when they get narrower."""
    app = PerftopApp()
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(RanksPanel).table
        for scale in (5, 1_000_000, 5):
            app.post_message(SnapshotMessage(many_ranks(scale)))
            await settle(pilot)
            col = table.columns[ColumnKey("steps")]
            cells = [table.get_cell(k, "steps").plain for k in table.rows]
            assert cells[-1] == f"{scale * 3:,}"
            assert col.content_width == max(max(map(len, cells)), col.label.cell_len)


def a_fleet(n: int = 100, slow: int = 90) -> Snapshot:
    """``n`` ranks on hosts of 8, each process sampled; rank ``slow`` is the slowest and
    the higher ranks use more CPU."""
    ranks = tuple(
        StepStats(pid=1000 + r, rank=r, count=50, p50=0.2 if r == slow else 0.1 + 1e-4 * r,
                  host=f"n{r // 8}")
        for r in range(n)
    )  # fmt: skip
    roles = tuple(ProcessRole(1000 + r, "rank", rank=r, host=f"n{r // 8}") for r in range(n))
    procs = tuple(
        ProcRow(1000 + r, name="python", cpu_percent=float(r), host=f"n{r // 8}") for r in range(n)
    )
    return dataclasses.replace(snapshot(), ranks=ranks, roles=roles, processes=procs)


def shown(table: DiffTable, column: str) -> set:
    return {table.get_cell(k, column).value for k in table.rows}


@aio
async def test_a_fleets_tables_list_the_first_rows_of_their_order_and_sum_up_the_rest():
    """Hundreds of ranks: the table renders the first rows of its order (and the slowest
    rank wherever it sorts), a line sums up the others, and sorting picks from all."""
    async with showing(a_fleet()) as (app, pilot):
        panel = app.query_one(RanksPanel)
        table = panel.table
        assert shown(table, "rank") == set(range(ranks.FIRST)) | {90}
        assert table.get_cell("n11:1090", "rank").plain == "90 ◀ slowest"
        rest = text_of(panel.rest)
        assert panel.has_class("-cut") and f"{100 - ranks.FIRST - 1} more ranks" in rest
        lo, hi = fmt.secs(0.1 + 1e-4 * ranks.FIRST), fmt.secs(0.1 + 1e-4 * 99)
        assert f"step p50 {lo}–{hi}" in rest, rest
        await pilot.press("8", "s", "i")  # the ranks table, by step time, slowest first
        await settle(pilot)
        assert (table.sort_column, table.sort_reverse) == ("step", True)
        assert shown(table, "rank") == set(range(100 - ranks.FIRST, 100))  # 90 among them
        assert table.ordered_rows[0].key.value == "n11:1090"
        procs = app.query_one(ProcessesPanel)
        assert len(procs.table.rows) == processes.FIRST and "(s sorts)" in procs.border_subtitle
        await pilot.press("4", "s", "s", "i")  # the processes by CPU%, busiest first
        await settle(pilot)
        assert (procs.table.sort_column, procs.table.sort_reverse) == ("cpu", True)
        assert shown(procs.table, "cpu") == {float(r) for r in range(100 - processes.FIRST, 100)}


def row_text(table: DiffTable, key: str) -> str:
    """What the screen shows of a row: its line as the table renders it."""
    y = table.get_row_index(key) + 1  # under the header
    return table.render_line(y - int(table.scroll_y)).text


@aio
async def test_a_tables_cells_are_drawn_anew_when_they_change_and_only_then() -> None:
    """Cells are rendered once for what they show where and how: a changed figure is
    drawn anew, the cursor's row in the cursor's style, and a zoom or a refresh that
    changes nothing draws no cell again."""
    async with showing(a_fleet(20)) as (app, pilot):
        table = app.query_one(RanksPanel).table
        await pilot.press("8")  # focus the ranks table: its cursor on the first row
        await settle(pilot)
        first = table.ordered_rows[0].key.value
        assert "50" in row_text(table, first)
        grown = a_fleet(20)
        grown = dataclasses.replace(
            grown, ranks=tuple(dataclasses.replace(r, count=77_777) for r in grown.ranks)
        )
        app.post_message(SnapshotMessage(grown))
        await settle(pilot)
        assert "77,777" in row_text(table, first) and " 50 " not in row_text(table, first)
        rendered = []
        real = DataTable._render_cell

        def counting(self, *args, **kwargs):  # Textual's renderer under the cache
            rendered.append(args[:2])
            return real(self, *args, **kwargs)

        await pilot.press("z", "escape")  # every row drawn once, zoomed
        await settle(pilot)
        DataTable._render_cell = counting
        try:
            app.post_message(SnapshotMessage(grown))  # the same figures again
            await settle(pilot)
            await pilot.press("z", "escape")  # zoom, and back: the same cells, same places
            await settle(pilot)
            assert [rc for rc in rendered if rc[0] >= 0] == []
            await pilot.press("down")  # the cursor moves: two rows in a new style
            await settle(pilot)
            assert {r for r, _ in rendered if r >= 0} <= {0, 1}
        finally:
            DataTable._render_cell = real
        strip = table.render_line(2)  # the second row, under the cursor now
        plain = table.render_line(3)
        assert strip.text != plain.text or list(strip)[0].style != list(plain)[0].style


def two_nodes_comm(hang: bool) -> Snapshot:
    """Equal own work on both ranks; rank 1 (on n2) arrives 30 ms late at every
    all-reduce; with ``hang``, rank 0 then waits 18 s in one rank 1 never entered."""
    from perftop.events import CollBatch, CollWaiting

    s = FleetSession()
    for node, rank, late in (("n1", 0, 0.0), ("n2", 1, 0.03)):
        evs: list = [Hello(1.0, 100, 1, "h", ("t",), rank, rank, 2)]
        evs += [Step(100, i, 1.0 + i, 1.05 + i, backward=0.04) for i in range(10)]
        recs = [("default_pg", i + 1, "all_reduce", 64, "[[16]]", 1.01 + i + late, 1)
                for i in range(10)]  # fmt: skip
        if hang and rank == 0:
            recs.append(("default_pg", 11, "all_reduce", 64, "[[16]]", 12.0, 1))
            evs.append(CollWaiting(30.0, 100, "default_pg", 11, "all_reduce", "[[16]]", 12.0,
                                   18.0, "train.py:9 main"))  # fmt: skip
        evs.append(CollBatch(11.0, 100, tuple(recs)))
        data = encode_frame(evs)
        s.apply_all(decode_frame(encode_node_frame(node, Frame(0, data[HEADER.size :])))[0])
    return s.snapshot()


@aio
async def test_the_comm_wait_column_the_straggler_by_arrival_and_a_hang() -> None:
    async with showing(snapshot()) as (app, pilot):
        app.post_message(SnapshotMessage(two_nodes_comm(hang=False)))
        await settle(pilot)
        table = app.query_one(RanksPanel).table
        assert table.get_cell("n1:100", "comm").plain.startswith(fmt.secs(0.03))
        assert table.get_cell("n2:100", "comm").plain.startswith(fmt.secs(0.0))
        assert table.get_cell("n2:100", "rank").plain == "1 ◀ straggler"
        assert "rank 1 on n2 arrives last" in str(app.query_one(RanksPanel).border_subtitle)
        app.post_message(SnapshotMessage(two_nodes_comm(hang=True)))
        await settle(pilot)
        sub = str(app.query_one(RanksPanel).border_subtitle)
        assert "HANG: all_reduce default_pg seq 11 has waited 18 s; not entered: rank 1" in sub
        notes = [n.message for n in app._notifications]
        assert any("seq 11" in n and "rank 1" in n for n in notes), notes


@aio
async def test_ranks_say_their_data_wait_was_read_before_forward() -> None:
    """Ranks whose hooks said their data wait is the time before the first forward (no
    DataLoader on the training thread) say so under the table, as the Steps panel does."""
    s = Session()
    for rank in (0, 1):
        pid = 100 + rank
        s.apply_all(
            [Hello(1.0, pid, 1, "h", ("t",), rank, rank, 2)]
            + [Step(pid, i, 1.0 + i, 1.5 + i, data=0.1, backward=0.2) for i in range(10)]
        )
    plain = s.snapshot()
    s.apply_all([Note(2.0, "info", f"hook:{pid}", DATA_WAIT_NOTE) for pid in (100, 101)])
    async with showing(plain) as (app, pilot):
        panel = app.query_one(RanksPanel)
        assert "data:" not in str(panel.border_subtitle)
        app.post_message(SnapshotMessage(s.snapshot()))
        await settle(pilot)
        assert "· data: before forward" in str(panel.border_subtitle), panel.border_subtitle


@aio
async def test_a_stopped_rank_says_so_while_the_job_runs_and_not_after() -> None:
    """Rank 0 stopped (its process's latest sample says so): its row says ``[stopped]``
    beside its last figures; once the job ended, it is not said (its state then is no
    longer known, and the hints and the k screen keep what the capture saw)."""
    from perftop.events import JobExit, ProcSample
    from perftop.events.probes import PROC_FIELDS

    s = Session()
    for rank, own, bwd in ((0, 0.002, 0.032), (1, 0.032, 0.002)):
        s.apply(Hello(1.0, 100 + rank, 1, "vm", ("t",), rank, rank, 2))
        s.apply_all(Step(100 + rank, i, 1.0 + i, 1.0 + i + own + bwd, data=own - 0.001,
                         backward=bwd) for i in range(10))  # fmt: skip
    row = dict.fromkeys(PROC_FIELDS) | {"pid": 100, "name": "python", "state": "stopped"}
    s.apply(ProcSample(11.5, 1.0, 100, (tuple(row[f] for f in PROC_FIELDS),)))
    async with showing(s.snapshot()) as (app, pilot):
        table = app.query_one(RanksPanel).table

        def key(pid: int) -> str:
            return next(k.value for k in table.rows if str(k.value).endswith(f":{pid}"))

        assert table.get_cell(key(100), "rank").plain == "0 [stopped]"
        assert table.get_cell(key(101), "rank").plain == "1 ◀ straggler"
        # a stopped straggler: its state stands for its mark, no wider than the mark
        straggler = next(r for r in s.snapshot().ranks if r.pid == 101)
        cell = ranks.rank_cells(straggler, "straggler", None, "stopped")[0]
        assert cell.plain == "1 [stopped]" and "yellow" in str(cell.style), cell
        s.apply(JobExit(12.0, 100, 0))
        app.post_message(SnapshotMessage(s.snapshot()))
        await settle(pilot)
        assert table.get_cell(key(100), "rank").plain == "0"
