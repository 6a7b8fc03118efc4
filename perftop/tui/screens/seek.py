"""The replay's "go to" prompt: a step number or a time since the session start."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label

from perftop.replay.controller import parse_target
from perftop.tui.screens.popup import OnceModal


class SeekScreen(OnceModal[tuple[str, float] | None]):
    """Dismisses with ``("step", n)`` or ``("time", seconds)``; esc cancels."""

    DEFAULT_CSS = """
    SeekScreen { align: center middle; }
    SeekScreen > Vertical {
        width: 70; max-width: 96%; height: auto;
        border: round $accent; background: $surface; padding: 0 1;
    }
    SeekScreen Label { color: $text-muted; width: 1fr; }
    """
    BINDINGS = [("escape", "cancel", "cancel")]

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = "go to"
            yield Label("a step (1200, #1200) or a time since the start (90s, 1:30, 2h)")
            yield Input(placeholder="step or time", id="seek-input")
            yield Label("", id="seek-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            target = parse_target(event.value)
        except ValueError as exc:
            self.query_one("#seek-error", Label).update(str(exc))
            return
        self.dismiss(target)

    def action_cancel(self) -> None:
        self.dismiss(None)
