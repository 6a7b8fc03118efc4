"""Output: the job's own stdout and stderr, scrollable. Only lines not shown yet are
appended (``Snapshot.output_total`` counts every line ever), and the view follows the end
unless the user scrolled up to read.

Following is a state the user's own scrolling sets, not a position: a resize that made the
view shorter once left it above the end, read as "the user scrolled up", and it never
followed again."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.widgets import RichLog

from perftop.model import Snapshot
from perftop.tui.widgets.panel import Panel

MAX_LINES = 5000


class FollowLog(RichLog):
    """A log that follows its newest line until the user scrolls up, and again once they
    scroll back to the end (``end``, or down to it); a resize keeps it as it was."""

    following = True

    def _moved(self) -> None:
        self.following = self.scroll_target_y >= self.max_scroll_y

    def on_resize(self, event: events.Resize) -> None:
        if self.following:
            self.scroll_end(animate=False)

    def action_scroll_end(self) -> None:
        super().action_scroll_end()
        self.following = True

    # Every way a user scrolls: keys, the wheel, the scrollbar.
    def action_scroll_up(self) -> None:
        super().action_scroll_up()
        self._moved()

    def action_scroll_down(self) -> None:
        super().action_scroll_down()
        self._moved()

    def action_page_up(self) -> None:
        super().action_page_up()
        self._moved()

    def action_page_down(self) -> None:
        super().action_page_down()
        self._moved()

    def action_scroll_home(self) -> None:
        super().action_scroll_home()
        self._moved()

    # Textual calls each class's handler of an event, ours first: look once theirs ran.
    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.call_later(self._moved)

    def _on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.call_later(self._moved)

    def _on_scroll_to(self, message: Any) -> None:  # the scrollbar, dragged or clicked
        self.call_later(self._moved)

    def _on_scroll_up(self, event: Any) -> None:
        self.call_later(self._moved)

    def _on_scroll_down(self, event: Any) -> None:
        self.call_later(self._moved)


class OutputPanel(Panel):
    TITLE = "Output"
    DEFAULT_CSS = """
    OutputPanel { padding: 0 0 0 1; }
    OutputPanel > RichLog { height: 1fr; background: transparent; scrollbar-size-vertical: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.log_view = FollowLog(max_lines=MAX_LINES, wrap=False, markup=False, auto_scroll=True)
        self.shown = 0  # output_total already written

    def compose(self) -> ComposeResult:
        yield self.log_view

    def show(self, snap: Snapshot) -> None:
        new = snap.output_total - self.shown
        if new <= 0:
            return
        lines = snap.output[-new:] if new <= len(snap.output) else snap.output
        follow = self.log_view.following
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
