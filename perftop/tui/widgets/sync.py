"""Sync: lines of user code that made (or would make) the host wait for the device,
most costly first (the sync detector fills ``Snapshot.sync``)."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult

from perftop.fmt import sync_rate, sync_where
from perftop.model import Snapshot
from perftop.model.snapshot import SyncSite
from perftop.safe import visible_line
from perftop.tui import fmt
from perftop.tui.widgets.difftable import Cell, DiffTable
from perftop.tui.widgets.panel import Panel
from perftop.tui.widgets.quiet import QuietStatic

# The place last: a library site's "user line → library line" can be long.
COLUMNS = (
    ("op", "op"),
    ("kind", "kind"),
    ("per_step", "per step"),
    ("count", "total"),
)
# Host time per watched step spent waiting in the site's calls: only measured on an
# accelerator, so the column is shown only once some site has a measurement.
BLOCKED = ("blocked", "blocked/step")
WHERE = ("where", "file:line")


def _rate(s: SyncSite) -> str:
    """The rate cell: what the sampling allows (:func:`perftop.fmt.sync_rate`)."""
    return sync_rate(s.per_step, s.error, s.seen, short=True, every=s.every_step, watched=s.watched)


def where(s: SyncSite) -> str:
    """The user's line, then the library line it went through: ``train.py:52 → …``."""
    callers = [(f, n) for f, n, _, _ in s.callers]
    user, via = sync_where(s.file, s.line, s.lib_file, s.lib_line, s.package, callers)
    return visible_line(f"{user} → {via}" if via else user)  # the job's file names


def site_cells(s: SyncSite, blocked: bool = True) -> list[Cell]:
    kind_style = "bold red" if s.kind == "sync" else "yellow"
    place = where(s)
    cells = [
        Cell(s.op, s.op, style=kind_style, justify="left"),
        # "potential": would make a GPU wait; seen on this device by the sampled detector.
        Cell(s.kind, s.kind, style=kind_style if s.kind == "sync" else "dim", justify="left"),
        Cell(_rate(s), s.per_step),
        Cell(f"{s.count:,}", s.count),
    ]
    if blocked:
        na = fmt.NA_STYLE if s.blocked_s is None else ""
        cells.append(Cell(fmt.secs(s.blocked_s), s.blocked_s, style=na))
    cells.append(Cell(place, place, justify="left"))
    return cells


OBSERVER = "sync sites need the hook: observer mode (attached without it) cannot see them"


def summary(sites: tuple[SyncSite, ...], observer: bool = False) -> Group | Text:
    """One line per site, most costly first, for narrow terminals; in observer mode, that
    no site can be seen (an empty list there is no all-clear)."""
    if not sites:
        return Text(OBSERVER if observer else "no host↔device syncs seen", style="dim")
    lines = []
    for s in sites:
        t = Text(visible_line(s.op), style="bold red" if s.kind == "sync" else "yellow")
        t.append(f" {where(s)}")
        rate = _rate(s)
        t.append(f" {rate}" if rate.startswith("~") else f" {rate}/step", style="dim")
        if s.kind != "sync":
            t.append(" potential", style="dim")
        if s.blocked_s is not None:
            t.append(f" {fmt.secs(s.blocked_s)}/step")
        t.no_wrap, t.overflow = True, "ellipsis"
        lines.append(t)
    return Group(*lines)


def subtitle(sites: tuple[SyncSite, ...]) -> str:
    """How many sites, and on how many watched steps their rates rest (± one standard
    error in the rate column), or that every step was watched (the exact mode)."""
    if not sites:
        return ""
    out = f"{len(sites)} sites"
    watched = max((s.watched or 0) for s in sites)
    if any(s.error == 0 for s in sites if s.watched):
        return f"{out}, exact: {watched} steps"
    return f"{out}, {watched} steps watched" if watched else out


class SyncPanel(Panel):
    TITLE = "Sync"
    DEFAULT_CSS = """
    SyncPanel > Static { display: none; }
    SyncPanel.-empty > DiffTable, SyncPanel.-compact > DiffTable { display: none; }
    SyncPanel.-empty > Static, SyncPanel.-compact > Static { display: block; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # Most frequent first: each sync drains the GPU's queue, so the rate is the cost
        # (the time blocked is measured on an accelerator only; its column is hidden else).
        self.table = DiffTable((*COLUMNS, WHERE), sort="per_step", reverse=True)
        self.summary = QuietStatic("no host↔device syncs seen", markup=False)

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
        self.summary.update(summary(snap.sync, snap.meta.observer))
        blocked = any(s.blocked_s is not None for s in snap.sync)
        self.table.set_columns((*COLUMNS, BLOCKED, WHERE) if blocked else (*COLUMNS, WHERE))
        rows = {}
        for s in snap.sync:
            key = f"{s.file}:{s.line}:{s.op}:{s.kind}:{s.lib_file}:{s.lib_line}"
            rows[key] = site_cells(s, blocked)
        self.table.set_rows(rows)
        self.border_subtitle = subtitle(snap.sync)
