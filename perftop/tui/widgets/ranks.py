"""Ranks: one row per rank of a distributed job, shown only when there is more than one.

Under DDP every rank's step takes the same time, so the columns that tell ranks apart are
where the time goes: data wait and the rest of its own work, and backward, which holds the
wait for the gradient all-reduce. The rank the others wait for is marked (see
:mod:`perftop.model.ranks`). Under the table, the collectives of the rank under its cursor
(:mod:`perftop.tui.widgets.rank_colls`): one line, and zoomed, each site that launched them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.app import ComposeResult
from textual.widgets import DataTable

from perftop.model import Snapshot
from perftop.model.comm_rows import RankComm
from perftop.model.ranks import Straggler, find_straggler, slowest
from perftop.model.snapshot import BEFORE_FORWARD, StepStats
from perftop.model.stands import held_in
from perftop.tui import fmt
from perftop.tui.widgets.difftable import FIRST_ROWS, Cell, DiffTable, First
from perftop.tui.widgets.panel import Panel
from perftop.tui.widgets.quiet import QuietStatic
from perftop.tui.widgets.rank_colls import RankColls

COLUMNS = (  # what tells ranks apart first: a narrow terminal scrolls to the rest
    ("rank", "rank"),
    ("step", "step p50"),
    ("data", "data"),
    ("own", "own work"),
    ("bwd", "backward"),
    ("comm", "comm wait"),
    ("gpu", "GPU"),
    ("syncs", "syncs"),
    ("steps", "steps"),
    ("host", "host"),
    ("pid", "pid"),
)


FIRST = FIRST_ROWS  # a fleet's other ranks are summed up under the table


def row_key(r: StepStats) -> str:
    return f"{r.host}:{r.pid}"


def rank_values(r: StepStats, c: RankComm | None = None) -> tuple[Any, ...]:
    """The raw figures of the row, in column order: what its cells show and sort by
    (``c``: its collectives, from :mod:`perftop.model.comm`)."""
    return (
        r.rank,
        r.p50,
        r.phase_p50.get("data"),
        r.own_p50,
        r.phase_p50.get("backward"),
        c.wait_s if c is not None else None,
        r.gpu_p50,
        r.sync_count,
        r.count,
        r.host,
        r.pid,
    )


def rank_cells(r: StepStats, mark: str, c: RankComm | None = None, state: str = "") -> list[Cell]:
    """A rank's row; ``state``: its process's where it is held where it stands (a stopped
    rank's figures are its last ones: it makes no step). A held rank's state stands for its
    mark (a stopped straggler is one because it is stopped), so the column stays as wide as
    a mark makes it and the figures stay in view at 80 columns."""
    rank, p50, data, own, bwd, comm, gpu, syncs, count, host, pid = rank_values(r, c)

    def t(v: float | None) -> Cell:
        return Cell(fmt.secs(v), v, style=fmt.NA_STYLE if v is None else "")

    label = "-" if rank is None else str(rank)
    if state:
        label += f" [{state}]"
    elif mark:
        label += f" ◀ {mark}"
    style = "bold yellow" if state else "bold red" if mark else "bold"
    return [
        Cell(label, rank, style=style, justify="left"),
        t(p50),
        t(data),
        t(own),
        t(bwd),
        _comm(comm, c),
        t(gpu),
        Cell(f"{syncs:,}", syncs),
        Cell(f"{count:,}", count),
        Cell(host or "-", host, justify="left"),
        Cell(str(pid), pid),
    ]


def _comm(v: float | None, c: RankComm | None) -> Cell:
    """The median exposed wait per step, with its share of the step."""
    if v is None or c is None:
        return Cell(fmt.secs(v), v, style=fmt.NA_STYLE)
    share = f" {c.exposed_share:.0%}" if c.exposed_share is not None else ""
    return Cell(fmt.secs(v) + share, v)


def comm_of(snap: Snapshot) -> dict[str, RankComm]:
    return {f"{c.host}:{c.pid}": c for c in snap.comm.ranks}


def first_rows(snap: Snapshot, straggler: Straggler | None, limit: int = FIRST) -> First[StepStats]:
    """The ranks the table shows: the first ``limit`` of its order, and the marked one
    (the straggler, by its own work or by who arrives last, or else the slowest)
    wherever it sorts."""
    slow = slowest(snap.ranks)
    mark = "straggler" if straggler is not None else "slowest"
    cs = snap.comm.straggler
    if straggler is None and cs is not None:
        slow = next((r for r in snap.ranks if r.pid == cs.pid and r.host == cs.host), slow)
        mark = "straggler"
    items = {row_key(r): r for r in snap.ranks}
    comm = comm_of(snap)
    over = snap.meta.ended  # (a rank stopped during the run is not said stopped after it)
    held = held_in(snap)
    return First(
        items,
        lambda r: rank_values(r, comm.get(row_key(r))),
        lambda k, r: rank_cells(
            r,
            mark if r is slow else "",
            comm.get(k),
            held(r.pid, 0.0, r.host) if r.pid is not None and not over else "",
        ),  # fmt: skip
        limit,
        pinned=(row_key(slow),) if slow is not None else (),
    )


def others(snap: Snapshot, shown: set[str]) -> str:
    """One line on the ranks the table leaves out: how many, and the spread of their
    figures, so a rank far from the others shows even when it is not listed."""
    rest = [rank_values(r) for r in snap.ranks if row_key(r) not in shown]
    if not rest:
        return ""
    parts = [f"{len(rest):,} more ranks"]
    for label, i in (("step p50", 1), ("data", 2), ("own", 3), ("backward", 4)):
        vs = [v for values in rest if (v := values[i]) is not None]
        if vs:
            parts.append(f"{label} {fmt.secs(min(vs))}–{fmt.secs(max(vs))}")
    return " · ".join(parts) + f" · s sorts: the first {FIRST} of each order are listed"


class RanksPanel(Panel):
    TITLE = "Ranks"
    DEFAULT_CSS = """
    RanksPanel > Static { height: 1; color: $text-muted; display: none; }
    RanksPanel.-cut > Static { display: block; }
    RanksPanel.-compact > RankColls { display: none; }
    RanksPanel.-compact > RankColls.-hang { display: block; }  /* a hang shows at any size */
    /* 80x24 gives the table three lines: a scrollbar there hid a rank (all of them in a
       hang); it still scrolls sideways with the arrows, as the Processes table does */
    RanksPanel.-compact > DiffTable { scrollbar-size-horizontal: 0; }
    RanksPanel.-full > DiffTable { height: auto; max-height: 45%; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.table = DiffTable(COLUMNS, sort="rank", reverse=False)
        self.rest = QuietStatic("", markup=False)
        self.colls = RankColls()
        self.display = False
        self._snap: Snapshot | None = None
        self._rows: Mapping[str, StepStats] = {}

    def compose(self) -> ComposeResult:
        yield self.table
        yield self.rest
        yield self.colls

    def set_compact(self, compact: bool) -> None:
        super().set_compact(compact)
        self.set_class(compact, "-compact")

    @property
    def selected(self) -> StepStats | None:
        """The rank under the table's cursor (its first row before any move)."""
        t = self.table
        if not t.row_count:
            return None
        row = t.ordered_rows[min(max(t.cursor_row, 0), t.row_count - 1)]
        return self._rows.get(str(row.key.value))

    def _show_colls(self) -> None:
        if self._snap is None:
            return
        full = self.is_attached and self.screen.maximized is self
        self.set_class(full, "-full")
        self.colls.show(self._snap, self.selected, full)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table is self.table:
            self._show_colls()

    def show(self, snap: Snapshot) -> None:
        many = len(snap.ranks) > 1
        if self.display != many:
            self.display = many
            if self.parent is not None:
                self.parent.set_class(many, "-ranks")
        if not many:
            return
        s = find_straggler(snap.ranks)
        first = first_rows(snap, s)
        self._snap, self._rows = snap, first.items
        self.table.set_first(first)
        self._show_colls()
        cut = self.table.left_out > 0
        self.set_class(cut, "-cut")
        if cut:
            self.rest.update(others(snap, {str(k.value) for k in self.table.rows}))
        hosts = len({r.host for r in snap.ranks})
        sub = f"{len(snap.ranks)} ranks" + (f" on {hosts} hosts" if hosts > 1 else "")
        cs = snap.comm.straggler
        if s is not None:
            name = snap.rank_label(s.rank, s.pid, s.host)
            sub += f" · {name} makes the others wait {fmt.secs(s.wait_s)}/step"
        elif cs is not None:
            name = snap.rank_label(cs.rank, cs.pid, cs.host)
            sub += f" · {name} arrives last: the others wait {fmt.secs(cs.wait_s)}/step"
        hang = next((h for h in snap.comm.hangs if h.ongoing), None)
        if hang is not None:
            sub += f" · {'DESYNC' if hang.desync else 'HANG'}: {hang.words}"
        if any(r.data_wait_source == "before_forward" for r in snap.ranks):
            sub += " · data: " + BEFORE_FORWARD.split(":", 1)[0]  # last: the least of them
        self.border_subtitle = sub
