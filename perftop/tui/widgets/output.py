"""Output: the job's own stdout and stderr, scrollable. Only lines not shown yet are
appended (``Snapshot.output_total`` counts every line ever), and the view follows the end
unless the user scrolled up to read."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import RichLog

from perftop.model import Snapshot
from perftop.tui.widgets.panel import Panel

MAX_LINES = 5000


class OutputPanel(Panel):
    TITLE = "Output"
    DEFAULT_CSS = """
    OutputPanel { padding: 0 0 0 1; }
    OutputPanel > RichLog { height: 1fr; background: transparent; scrollbar-size-vertical: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.log_view = RichLog(max_lines=MAX_LINES, wrap=False, markup=False, auto_scroll=True)
        self.shown = 0  # output_total already written

    def compose(self) -> ComposeResult:
        yield self.log_view

    def show(self, snap: Snapshot) -> None:
        new = snap.output_total - self.shown
        if new <= 0:
            return
        lines = snap.output[-new:] if new <= len(snap.output) else snap.output
        follow = self.log_view.is_vertical_scroll_end or self.log_view.max_scroll_y == 0
        if new > len(snap.output):
            skipped = new - len(snap.output)
            self.log_view.write(
                Text(f"… {skipped:,} {_lines(skipped)} not shown", style="dim"), scroll_end=follow
            )
        for line in lines:
            style = "red" if line.stream == "stderr" else ""
            self.log_view.write(Text(line.text, style=style), scroll_end=follow)
        self.shown = snap.output_total
        n = snap.output_total
        self.border_subtitle = f"{n:,} {_lines(n)}"


def _lines(n: int) -> str:
    return "line" if n == 1 else "lines"
