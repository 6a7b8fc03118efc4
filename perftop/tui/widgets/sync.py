"""Sync: lines of user code that made (or would make) the host wait for the device,
most costly first (the sync detector fills ``Snapshot.sync``)."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult

from perftop.fmt import count
from perftop.fmt_sync import sync_rate, sync_where
from perftop.model import Snapshot
from perftop.model.snapshot import SyncSite, SyncWatch
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
    """The rate cell: what the sampling allows (:func:`perftop.fmt_sync.sync_rate`); a site
    between steps (an evaluation's), per pass over the passes watched."""
    if s.per_pass is not None:
        return f"{s.per_pass:.1f}/pass"
    return sync_rate(s.per_step, s.error, s.seen, short=True, every=s.every_step, watched=s.watched)


MIN_WHERE = 12  # the place's cell is never squeezed narrower


def where(s: SyncSite, width: int | None = None) -> str:
    """The user's line, then the library line it went through: ``train.py:52 → …``; in
    ``width`` cells at most (:func:`squeeze`)."""
    callers = [(f, n) for f, n, _, _ in s.callers]
    user, via = sync_where(s.file, s.line, s.lib_file, s.lib_line, s.package, callers)
    user, via = visible_line(user), visible_line(via)  # the job's file names
    return squeeze(user, via, width) if width is not None else (f"{user} → {via}" if via else user)


def squeeze(user: str, via: str, width: int) -> str:
    """``user → via`` in ``width`` cells, cut in the middle, never at the end: sites that
    one user line reaches through a library differ in the library's file and line, which a
    cut at the right edge took off (``train.py:52 → ignite/eng…`` twice). The library's
    folders go first, then the start of its file's name, then all but its line; narrower
    still, the whole place (the table scrolls: the user's line is never the part cut)."""
    full = f"{user} → {via}" if via else user
    width = max(width, MIN_WHERE)
    if len(full) <= width:
        return full
    if via:
        name = via.rsplit("/", 1)[-1]
        if len(user) + len(" → …") + len(name) <= width:
            return f"{user} → …{name}"
        keep = width - len(user) - len(" → …")
        if keep >= 8:
            return f"{user} → …{name[len(name) - keep :]}"
        line = f"{user} → …:{via.rsplit(':', 1)[-1]}"
        if len(line) <= width:
            return line
        return full  # too narrow for the user's line and the library's: the table scrolls
    return "…" + full[len(full) - width + 1 :]


def site_cells(s: SyncSite, blocked: bool = True, width: int | None = None) -> list[Cell]:
    """A site's row; its place in ``width`` cells at most (:func:`squeeze`)."""
    kind_style = "bold red" if s.kind == "sync" else "yellow"
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
    cells.append(place_cell(s, width))
    return cells


def place_cell(s: SyncSite, width: int | None) -> Cell:
    place = where(s, width)
    return Cell(place, place, justify="left")


OBSERVER = "sync sites need the hook: observer mode (attached without it) cannot see them"


def summary(
    sites: tuple[SyncSite, ...], observer: bool = False, watch: SyncWatch | None = None
) -> Group | Text:
    """One line per site, most costly first, for narrow terminals; in observer mode, that
    no site can be seen, and where the detector stopped looking (torch.compile), that it
    did: an empty list there is no all-clear."""
    if not sites:
        if observer:
            return Text(OBSERVER, style="dim")
        watch = watch or SyncWatch()
        none = "no host↔device syncs seen"
        if watch.watched:
            none += f" in {count(watch.watched, 'watched step')}"
        if not watch.paused:
            return Text(none, style="dim")
        return Group(Text(none, style="dim"), paused_line(watch.paused))
    lines = []
    for s in sites:
        t = Text(visible_line(s.op), style="bold red" if s.kind == "sync" else "yellow")
        t.append(f" {where(s)}")
        rate = _rate(s)
        plain = rate.startswith("~") or s.per_pass is not None
        t.append(f" {rate}" if plain else f" {rate}/step", style="dim")
        if s.kind != "sync":
            t.append(" potential", style="dim")
        if s.blocked_s is not None:
            t.append(f" {fmt.secs(s.blocked_s)}/step")
        t.no_wrap, t.overflow = True, "ellipsis"
        lines.append(t)
    return Group(*lines)


def paused_line(why: str) -> Text:
    """The detector stopped sampling for good: its rates end there, and later lines are
    not looked for."""
    t = Text("detection paused: ", style="yellow")
    t.append(f"{visible_line(why)}; later sites are not looked for", style="dim")
    t.no_wrap, t.overflow = True, "ellipsis"
    return t


def subtitle(sites: tuple[SyncSite, ...], between: tuple[SyncSite, ...] = ()) -> str:
    """How many sites, and on how many watched steps their rates rest (± one standard
    error in the rate column), or that every step was watched (the exact mode); and the
    passes between steps watched, where their syncs are listed."""
    if not sites and not between:
        return ""
    out = count(len(sites) + len(between), "site")
    passes = max((s.passes or 0) for s in between) if between else 0
    held = f"{passes} pass" if passes == 1 else f"{passes} passes"
    also = f", {held} between steps" if passes else ""
    watched = max((s.watched or 0) for s in sites) if sites else 0
    if any(s.exact for s in sites):
        return f"{out}, exact: {watched} steps{also}"
    return (f"{out}, {watched} steps watched" if watched else out) + also


def passes_note(snap: Snapshot) -> str:
    """Where passes ran between steps (evaluations, rollouts) and none of their syncs is
    listed: how many the detector watched whole (a long one never fits a watch's budget),
    so no line there is no all-clear."""
    if snap.sync_between or not snap.sync_watch.watched:
        return ""
    n = snap.passes_run
    return f" · {snap.sync_watch.passes} of {n} passes watched" if n else ""


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
        self._last: Snapshot | None = None
        self._shown: tuple[object, ...] | None = None  # what the last show drew, and where

    def compose(self) -> ComposeResult:
        yield self.summary
        yield self.table

    def on_mount(self) -> None:
        self.add_class("-empty")

    def set_compact(self, compact: bool) -> None:
        super().set_compact(compact)
        self.set_class(compact, "-compact")
        self.can_focus = compact  # the summary has nothing to focus; the panel does

    def on_resize(self) -> None:
        """The place's cells fit the new width now, not at the next snapshot (a paused
        replay has none)."""
        if self._last is not None:
            self.show(self._last)

    def show(self, snap: Snapshot) -> None:
        self._last = snap
        # The sites change at a watched step, a few a second at most: the same sites in the
        # same room are not formatted again (their cells were the dearest of this panel).
        room = (self.table.scrollable_content_region.width, self.content_region.width)
        passes = passes_note(snap)
        key = (snap.sync, snap.sync_between, snap.sync_watch, snap.meta.observer, room, passes)
        if key == self._shown:
            return
        self._shown = key
        # the steps' sites, then those of the passes between steps (an evaluation's)
        listed = (*snap.sync, *snap.sync_between)
        self.set_class(not listed, "-empty")
        self.summary.update(summary(listed, snap.meta.observer, snap.sync_watch))
        blocked = any(s.blocked_s is not None for s in listed)
        self.table.set_columns((*COLUMNS, BLOCKED, WHERE) if blocked else (*COLUMNS, WHERE))
        sites = {
            f"{s.file}:{s.line}:{s.op}:{s.kind}:{s.lib_file}:{s.lib_line}": s for s in snap.sync
        }
        sites.update(
            {
                f"pass:{s.file}:{s.line}:{s.op}:{s.kind}:{s.lib_file}:{s.lib_line}": s
                for s in snap.sync_between
            }
        )
        rows = {key: site_cells(s, blocked) for key, s in sites.items()}
        width = self._where_width(rows)  # the cells' widths but the place's
        for row, s in sites.items():  # the place in that room; the other cells as they are
            rows[row][-1] = place_cell(s, width)
        self.table.set_rows(rows)
        paused = " · detection paused" if snap.sync_watch.paused and listed else ""
        sub = subtitle(snap.sync, snap.sync_between) + paused + passes
        self.border_subtitle = sub.removeprefix(" · ")

    def _where_width(self, rows: dict[str, list[Cell]]) -> int:
        """What the table's width leaves the place's column (the last), once the other
        columns have their cells' width: the place is squeezed into it, not cut."""
        pad = 2 * self.table.cell_padding
        labels = self.table.label_widths()
        others = sum(
            max([label, *(cells[i].cell_len for cells in rows.values())]) + pad
            for i, label in enumerate(labels[:-1])
        )
        # (the table's own region, once laid out; the panel's until then)
        shown = self.table.scrollable_content_region.width or self.content_region.width
        return shown - others - pad
