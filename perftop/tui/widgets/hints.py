"""Hints: what perftop thinks slows the job down, most at stake first, each with its
measured evidence, what to try, and the panel that proves it (``e`` jumps there).

Every hint's title line is shown; the space left goes to the evidence and advice of the
most important ones first. Warnings about the monitoring itself follow the hints."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from perftop.model import Snapshot
from perftop.model.snapshot import Hint
from perftop.tui.widgets.panel import TextPanel

LEVEL_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}
SEVERITY_STYLES = {"high": "bold red", "medium": "yellow", "info": "cyan"}
PANEL_NAMES = {"steps": "Steps", "gpu": "GPU", "host": "Host", "procs": "Processes", "sync": "Sync"}


def title_line(h: Hint, index: int) -> Text:
    t = Text(f"{index}. ", style="dim")
    t.append(f"{h.severity.upper()} ", style=SEVERITY_STYLES.get(h.severity, "yellow"))
    t.append(h.title, style="bold")
    if h.panel in PANEL_NAMES:
        t.append(f"  → {PANEL_NAMES[h.panel]}", style="dim")
    return t


def detail_lines(h: Hint, room: int) -> list[Text]:
    """Up to ``room`` lines of evidence and advice: when they do not all fit, the first
    evidence and the first advice come before the rest, shown in reading order."""
    lines: list[tuple[int, Text]] = []  # (priority, line) in reading order
    for i, e in enumerate(h.evidence):
        lines.append((0 if i == 0 else 2 + i, Text(f"   {e}")))
    if h.est_gain_text:
        lines.append((50, Text(f"   at stake: {h.est_gain_text}", style="dim")))
    for i, a in enumerate(h.advice):
        lines.append((1 if i == 0 else 60 + i, Text.assemble(("   try: ", "green"), a)))
    keep = {p for p, _ in sorted(lines, key=lambda x: x[0])[: max(0, room)]}
    return [t for p, t in lines if p in keep]


class HintsPanel(TextPanel):
    TITLE = "Hints"

    def render_body(self, snap: Snapshot) -> RenderableType:
        hints = snap.hints
        notes = [n for n in snap.notes if n.level in ("warning", "error")][-5:]
        self.border_subtitle = "e: show the proof" if hints else ""
        if not hints and not notes:
            return Text("no hints yet: nothing found that slows this job down", style="dim")
        height = self.content_region.height if self.is_attached else 0
        room = 10_000 if self.zoomed or not height else height - len(hints) - len(notes)
        lines: list[Text] = []
        for i, h in enumerate(hints):
            lines.append(title_line(h, i + 1))
            more = [] if self.compact else detail_lines(h, room)
            room -= len(more)
            lines.extend(more)
        for n in notes:
            t = Text("! ", style=LEVEL_STYLES.get(n.level, "yellow"))
            t.append(n.text)
            t.append(f"  ({n.source})", style="dim")
            lines.append(t)
        return Group(*lines)
