"""The ``e`` box: a hint whole (its title, the measured evidence, the advice) and the panel
that proves it, which ``e`` has focused underneath. ``e`` again: the next hint."""

from __future__ import annotations

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from perftop.model.snapshot import Hint
from perftop.safe import visible_line
from perftop.tui.screens.popup import ScrollPopup


class EvidenceScreen(ScrollPopup):
    TITLE = "evidence"

    def __init__(self, hint: Hint, index: int, total: int, panel: str) -> None:
        super().__init__()
        self.hint, self.index, self.total, self.panel = hint, index, total, panel

    def body(self) -> ComposeResult:
        h = self.hint
        head = Text()
        head.append(f"{self.index + 1}/{self.total} ", style="dim")
        head.append(visible_line(f"[{h.severity}] {h.title}"), style="bold")
        lines = Table.grid(padding=(0, 1))  # wrapped lines hang under their text
        lines.add_column(no_wrap=True)
        lines.add_column()
        for line in h.evidence:
            lines.add_row("•", Text(visible_line(line)))  # plain text, never markup
        for line in h.advice:
            lines.add_row(Text("→", style="cyan"), Text(visible_line(line), style="cyan"))
        if h.est_gain_text:
            lines.add_row("", Text(h.est_gain_text, style="dim"))
        where = f"proof: the {self.panel} panel (focused)" if self.panel else "no panel proves it"
        tail = Text(f"{where} · e: the next hint · any other key closes", style="dim")
        yield Static(Group(head, Padding(lines, (0, 0, 0, 1)), Text(), tail))
