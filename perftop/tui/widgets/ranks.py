"""Ranks: one row per rank of a distributed job, shown only when there is more than one.

Under DDP every rank's step takes the same time, so the columns that tell ranks apart are
where the time goes: data wait and the rest of its own work, and backward, which holds the
wait for the gradient all-reduce. The rank the others wait for is marked (see
:mod:`perftop.model.ranks`).
"""

from __future__ import annotations

from textual.app import ComposeResult

from perftop.model import Snapshot
from perftop.model.ranks import find_straggler, slowest
from perftop.model.snapshot import StepStats
from perftop.tui import fmt
from perftop.tui.widgets.difftable import Cell, DiffTable
from perftop.tui.widgets.panel import Panel

COLUMNS = (  # what tells ranks apart first: a narrow terminal scrolls to the rest
    ("rank", "rank"),
    ("step", "step p50"),
    ("data", "data"),
    ("own", "own work"),
    ("bwd", "backward"),
    ("gpu", "GPU"),
    ("syncs", "syncs"),
    ("steps", "steps"),
    ("host", "host"),
    ("pid", "pid"),
)


def row_key(r: StepStats) -> str:
    return f"{r.host}:{r.pid}"


def rank_cells(r: StepStats, mark: str) -> list[Cell]:
    def t(v: float | None) -> Cell:
        return Cell(fmt.secs(v), v, style=fmt.NA_STYLE if v is None else "")

    rank = "-" if r.rank is None else str(r.rank)
    if mark:
        rank += f" ◀ {mark}"
    return [
        Cell(rank, r.rank, style="bold red" if mark else "bold", justify="left"),
        t(r.p50),
        t(r.phase_p50.get("data")),
        t(r.own_p50),
        t(r.phase_p50.get("backward")),
        t(r.gpu_p50),
        Cell(f"{r.sync_count:,}", r.sync_count),
        Cell(f"{r.count:,}", r.count),
        Cell(r.host or "-", r.host, justify="left"),
        Cell(str(r.pid), r.pid),
    ]


def table_rows(snap: Snapshot) -> dict[str, list[Cell]]:
    slow = slowest(snap.ranks)
    strag = find_straggler(snap.ranks)
    rows = {}
    for r in snap.ranks:
        mark = ""
        if slow is not None and r is slow:
            mark = "straggler" if strag is not None else "slowest"
        rows[row_key(r)] = rank_cells(r, mark)
    return rows


class RanksPanel(Panel):
    TITLE = "Ranks"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.table = DiffTable(COLUMNS, sort="rank", reverse=False)
        self.display = False

    def compose(self) -> ComposeResult:
        yield self.table

    def show(self, snap: Snapshot) -> None:
        many = len(snap.ranks) > 1
        if self.display != many:
            self.display = many
            if self.parent is not None:
                self.parent.set_class(many, "-ranks")
        if not many:
            return
        self.table.set_rows(table_rows(snap))
        s = find_straggler(snap.ranks)
        hosts = len({r.host for r in snap.ranks})
        sub = f"{len(snap.ranks)} ranks" + (f" on {hosts} hosts" if hosts > 1 else "")
        if s is not None:
            sub += f" · {s.label} makes the others wait {fmt.secs(s.wait_s)}/step"
        self.border_subtitle = sub
