"""The ``e`` box: a hint whole (its title, the measured evidence, the advice) and the panel
that proves it, which ``e`` has focused underneath. ``e`` again: the next hint."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from perftop.model.snapshot import Hint
from perftop.tui.screens.popup import ScrollPopup


class EvidenceScreen(ScrollPopup):
    TITLE = "evidence"

    def __init__(self, hint: Hint, index: int, total: int, panel: str) -> None:
        super().__init__()
        self.hint, self.index, self.total, self.panel = hint, index, total, panel

    def body(self) -> ComposeResult:
        h = self.hint
        text = Text()
        text.append(f"{self.index + 1}/{self.total} ", style="dim")
        text.append(f"[{h.severity}] {h.title}\n", style="bold")
        for line in h.evidence:
            text.append(f"  • {line}\n")
        for line in h.advice:
            text.append(f"  → {line}\n", style="cyan")
        if h.est_gain_text:
            text.append(f"  {h.est_gain_text}\n", style="dim")
        where = f"proof: the {self.panel} panel (focused)" if self.panel else "no panel proves it"
        text.append(f"\n{where} · e: the next hint · any other key closes", style="dim")
        yield Static(text)
