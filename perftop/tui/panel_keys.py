"""The keys that move about the panels: a digit focuses one, ``z`` zooms it, ``e`` goes to
the panel that proves a hint, ``s`` and ``i`` sort its table. They act on the composed
panels alone, never on the job, so they stand apart from the app's wiring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perftop.model import Snapshot
from perftop.tui.screens.evidence import EvidenceScreen
from perftop.tui.widgets import Panel, StepsPanel
from perftop.tui.widgets.difftable import DiffTable

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[str | None]
else:
    _AppBase = object


class PanelKeys(_AppBase):
    """Mixed into :class:`perftop.tui.app.PerftopApp`."""

    shown: Snapshot | None
    _proof: int

    _panels: list[Panel] | None = None

    @property
    def panels(self) -> list[Panel]:
        """The panels, as composed (they stay: a CSS query at each snapshot costs)."""
        if not self._panels and self.screen_stack:
            self._panels = list(self.screen_stack[0].query(Panel))
        return list(self._panels or ())

    def _focused_panel(self) -> Panel | None:
        w = self.focused
        while w is not None and not isinstance(w, Panel):
            w = w.parent  # type: ignore[assignment]
        return w

    def action_zoom(self) -> None:
        if self.screen.maximized is not None:
            self.action_unzoom()
            return
        panel = self._focused_panel() or self.query_one(StepsPanel)
        self.screen.maximize(panel, container=False)

    def action_unzoom(self) -> None:
        self.screen.minimize()

    def action_focus_panel(self, index: int) -> None:
        panel = self.panels[index]
        if not panel.display:
            self.notify(f"no {panel.TITLE} panel in this session", timeout=3)
            return
        target = next(iter(panel.query("DiffTable, RichLog")), panel)
        target = target if target.display else panel
        target.focus()
        if self.screen.maximized is not None:
            self.screen.maximize(panel, container=False)

    def action_goto_proof(self) -> None:
        """Focus the panel whose figures prove a hint (the top one, then the next) and show
        the hint whole over it; ``e`` there goes on to the next hint."""
        hints = self.shown.hints if self.shown is not None else ()
        if not hints:
            self.notify("no hints yet", timeout=3)
            return
        self._proof = (self._proof + 1) % len(hints)
        h = hints[self._proof]
        ids = [p.id for p in self.panels]
        title = ""
        if h.panel in ids:
            panel = self.panels[ids.index(h.panel)]
            self.action_focus_panel(ids.index(h.panel))
            title = panel.TITLE if panel.display else ""

        def closed(key: str | None) -> None:
            if key == "e":
                self.action_goto_proof()

        self.push_screen(EvidenceScreen(h, self._proof, len(hints), title), closed)

    def _table(self) -> DiffTable | None:
        panel = self._focused_panel()
        tables = list(panel.query(DiffTable)) if panel is not None else []
        return tables[0] if tables else None

    def action_sort(self) -> None:
        table = self._table()
        if table is None:
            self.notify("focus a table to sort it (4: processes, 5: sync)", timeout=3)
        else:
            table.next_sort()

    def action_invert(self) -> None:
        table = self._table()
        if table is not None:
            table.invert_sort()
