"""The ``j`` box: one line typed for the job's stdin (its ``input()``, a ``breakpoint()``
prompt). Enter sends it; Esc closes without sending."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Static

from perftop.tui.screens.popup import OnceModal


class JobInputScreen(OnceModal[str | None]):
    """Dismisses with the line typed, or ``None`` (cancelled)."""

    DEFAULT_CSS = """
    JobInputScreen { align: center middle; }
    JobInputScreen > Vertical {
        width: 70; max-width: 95%; height: auto;
        border: round $accent; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, waiting: bool) -> None:
        super().__init__()
        self.waiting = waiting

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = "Input for the job"
            said = "The job is waiting for input." if self.waiting else "A line for the job."
            yield Static(f"{said} [b]enter[/b] sends it to its stdin   [b]esc[/b] cancel")
            yield Input(placeholder="a line for the job's stdin", id="line")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
