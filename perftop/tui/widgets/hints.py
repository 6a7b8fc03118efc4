"""Hints: what perftop thinks slows the job down, with evidence. The hints issue fills
this; until then (and while no hint fired) the panel says so instead of staying blank."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from perftop.model import Snapshot
from perftop.tui.widgets.panel import TextPanel

LEVEL_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}


class HintsPanel(TextPanel):
    TITLE = "Hints"

    def render_body(self, snap: Snapshot) -> RenderableType:
        hints = getattr(snap, "hints", ())  # the hints issue adds Snapshot.hints
        notes = [n for n in snap.notes if n.level in ("warning", "error")]
        if not hints and not notes:
            return Text("no hints yet", style="dim")
        lines: list[Text] = []
        for h in hints:
            t = Text("● ", style=LEVEL_STYLES.get(getattr(h, "level", ""), "yellow"))
            t.append(str(getattr(h, "title", h)), style="bold")
            ev = getattr(h, "evidence", "")
            if ev and not self.compact:
                t.append(f"  {ev}", style="dim")
            lines.append(t)
        for n in notes[-5:]:
            t = Text("! ", style=LEVEL_STYLES.get(n.level, "yellow"))
            t.append(n.text)
            t.append(f"  ({n.source})", style="dim")
            lines.append(t)
        return Group(*lines)
