"""Sync: lines of user code that made (or would make) the host wait for the device,
most costly first (the sync detector fills ``Snapshot.sync``)."""

from __future__ import annotations

import os

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from perftop.model import Snapshot
from perftop.model.snapshot import SyncSite
from perftop.tui import fmt
from perftop.tui.widgets.difftable import Cell, DiffTable
from perftop.tui.widgets.panel import Panel

COLUMNS = (
    ("op", "op"),
    ("kind", "kind"),
    ("where", "file:line"),
    ("per_step", "per step"),
    ("count", "total"),
    ("blocked", "blocked"),
)


def site_cells(s: SyncSite) -> list[Cell]:
    kind_style = "bold red" if s.kind == "sync" else "yellow"
    where = f"{os.path.basename(s.file)}:{s.line}"
    return [
        Cell(s.op, s.op, style=kind_style, justify="left"),
        # "potential": would make a GPU wait; seen on this device by the sampled detector.
        Cell(s.kind, s.kind, style=kind_style if s.kind == "sync" else "dim", justify="left"),
        Cell(where, where, justify="left"),
        Cell(f"{s.per_step:.2f}" if s.per_step < 1 else f"{s.per_step:.1f}", s.per_step),
        Cell(f"{s.count:,}", s.count),
        Cell(fmt.secs(s.blocked_s), s.blocked_s, style=fmt.NA_STYLE if s.blocked_s is None else ""),
    ]


def summary(sites: tuple[SyncSite, ...]) -> Group | Text:
    """One line per site, most costly first, for narrow terminals."""
    if not sites:
        return Text("no host↔device syncs seen", style="dim")
    lines = []
    for s in sites:
        t = Text(s.op, style="bold red" if s.kind == "sync" else "yellow")
        t.append(f" {os.path.basename(s.file)}:{s.line}")
        t.append(f" {s.per_step:.1f}/step", style="dim")
        if s.kind != "sync":
            t.append(" potential", style="dim")
        if s.blocked_s is not None:
            t.append(f" {fmt.secs(s.blocked_s)}")
        t.no_wrap, t.overflow = True, "ellipsis"
        lines.append(t)
    return Group(*lines)


class SyncPanel(Panel):
    TITLE = "Sync"
    DEFAULT_CSS = """
    SyncPanel > Static { display: none; }
    SyncPanel.-empty > DiffTable, SyncPanel.-compact > DiffTable { display: none; }
    SyncPanel.-empty > Static, SyncPanel.-compact > Static { display: block; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        # Most frequent first: each sync drains the GPU's queue, so the rate is the cost
        # (the time blocked is rarely measurable; it is N/A then, and sorts last).
        self.table = DiffTable(COLUMNS, sort="per_step", reverse=True)
        self.summary = Static("no host↔device syncs seen", markup=False)

    def compose(self) -> ComposeResult:
        yield self.summary
        yield self.table

    def on_mount(self) -> None:
        self.add_class("-empty")

    def set_compact(self, compact: bool) -> None:
        super().set_compact(compact)
        self.set_class(compact, "-compact")
        self.can_focus = compact  # the summary has nothing to focus; the panel does

    def show(self, snap: Snapshot) -> None:
        self.set_class(not snap.sync, "-empty")
        self.summary.update(summary(snap.sync))
        rows = {}
        for i, s in enumerate(snap.sync):
            cells = site_cells(s)
            if s.blocked_s is None:  # keep the detector's rank when time is unknown
                cells[4].value = -1.0 - i
            rows[f"{s.file}:{s.line}:{s.op}"] = cells
        self.table.set_rows(rows)
        self.border_subtitle = f"{len(snap.sync)} sites" if snap.sync else ""
