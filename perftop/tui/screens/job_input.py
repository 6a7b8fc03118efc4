"""The ``j`` box: one line typed for the job's stdin (its ``input()``, a ``breakpoint()``
prompt). Enter sends it; Esc closes without sending.

Keys typed ahead, in one burst with ``j`` (``j`` then ``no⏎`` on a screen that lags), were
already on their way to the panel focused before the box: the letters were lost and the
enter, checked against the box's bindings once it showed, sent an empty line. The app hands
such letters to :meth:`JobInputScreen.type_ahead` (see :mod:`perftop.tui.job_input_keys`)."""

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
        self._ahead = ""  # typed before the box was there

    def type_ahead(self, text: str) -> None:
        """``text`` typed into the box, which may not be composed yet."""
        line = self.query(Input).first() if self.is_mounted else None
        if line is None:
            self._ahead += text
        else:
            line.insert_text_at_cursor(text)

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = "Input for the job"
            said = "The job is waiting for input." if self.waiting else "A line for the job."
            yield Static(f"{said} [b]enter[/b] sends it to its stdin   [b]esc[/b] cancel")
            yield Input(placeholder="a line for the job's stdin", id="line")

    def on_mount(self) -> None:
        line = self.query_one(Input)
        line.focus()
        if self._ahead:
            line.insert_text_at_cursor(self._ahead)
            self._ahead = ""

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
