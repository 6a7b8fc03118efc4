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
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import RichLog

from perftop.model import Snapshot
from perftop.tui.sgr import append_line
from perftop.tui.widgets.panel import Panel

MAX_LINES = 5000
RENDER_LINES = 100  # at most this many new lines rendered per snapshot; the rest counted


class FollowLog(RichLog):
    """A log that follows its newest line until the user scrolls up, and again once they
    scroll back to the end (``end``, or down to it); a resize keeps it as it was.

    Its lines do not lay the screen out: RichLog sets its virtual size at each write, a
    reactive that lays out the whole screen (all panels) and then repaints it a second time
    for the deferred scroll to the end: a job printing at each step cost the monitor ~1.5%
    of a core at 160x48. The log's own box never changes with its lines; only its
    scrollbars do, which are updated here (a scrollbar that appears or goes lays the screen
    out, as Textual's own reactive does)."""

    following = True
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        update = getattr(self, "_scroll_update", None)  # Textual's; else lay it out
        if update is None:
            self.refresh(layout=True)
        else:
            update(size)

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
        self.not_shown = 0  # lines counted but not rendered
        self.said_elsewhere = False  # said that the job's output is not in this session

    def compose(self) -> ComposeResult:
        yield self.log_view

    def show(self, snap: Snapshot) -> None:
        new = snap.output_total - self.shown
        if new <= 0:
            if not snap.output_total and not self.said_elsewhere:
                self._elsewhere(snap)
            return
        # Lines beyond what a screen can show are counted, not rendered: a job printing
        # 50,000 lines/s once made each snapshot render 2,000 lines and keys wait seconds.
        lines = snap.output[-min(new, len(snap.output), RENDER_LINES) :]
        follow = self.log_view.following
        skipped = new - len(lines)
        if skipped:
            self.not_shown += skipped
            self.log_view.write(
                Text(f"… {skipped:,} {_lines(skipped)} not shown", style="dim"), scroll_end=False
            )
        # One write for them all: RichLog measures, renders and scrolls once per write.
        text = Text()
        for i, line in enumerate(lines):
            # The job's own bytes: its colours as styles, its other escapes shown (^[),
            # never obeyed by the terminal.
            append_line(text, line.text, "red" if line.stream == "stderr" else "")
            if i < len(lines) - 1:
                text.append("\n")
        if lines:
            self.log_view.write(text, scroll_end=False)
        if follow:  # now, not after a repaint (RichLog's own): the screen is drawn once
            self.log_view.scroll_end(animate=False, immediate=True, x_axis=False)
        self.shown = snap.output_total
        n = snap.output_total
        hidden = f" ({self.not_shown:,} not shown)" if self.not_shown else ""
        self.border_subtitle = f"{n:,} {_lines(n)}{hidden}"

    def _elsewhere(self, snap: Snapshot) -> None:
        """An empty panel says why, where the session says its output went elsewhere: a
        replay of a headless run, a viewer of one, an observed process."""
        if snap.meta.output_to == "terminal":
            why = "the job wrote its output to its own terminal (perftop run --headless): none of it is in this session"
        elif snap.meta.observer:
            why = "observer mode: the process writes to its own terminal, not seen here"
        else:
            return
        self.log_view.write(Text(why, style="dim"), scroll_end=False)
        self.said_elsewhere = True


def _lines(n: int) -> str:
    return "line" if n == 1 else "lines"
