"""The titled box every panel lives in, and the text-panel base most panels use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Region
from textual.widget import Widget

from perftop.model import Snapshot
from perftop.tui.widgets.quiet import QuietStatic

if TYPE_CHECKING:
    from typing_extensions import Self

_SUBTITLE = Widget.__dict__["border_subtitle"]  # Textual's descriptor


class Panel(Vertical, can_focus=False):
    """A bordered, titled, zoomable box. ``show(snap)`` updates it; ``compact`` is set
    when the terminal is narrow so panels render summaries instead of detail."""

    ALLOW_MAXIMIZE = True
    TITLE = ""
    DEFAULT_CSS = """
    Panel {
        border: round $primary-darken-1;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0 1;
        height: 1fr;
        width: 1fr;
    }
    Panel:focus-within, Panel:focus {
        border: round $accent;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = self.TITLE
        self.compact = False

    @property
    def border_subtitle(self) -> str | None:
        return _SUBTITLE.__get__(self, type(self))

    @border_subtitle.setter
    def border_subtitle(self, title: str | None) -> None:
        """Textual repaints the whole panel at each set; panels set their subtitle at each
        snapshot, so only a new one is set, and only the bottom border line (where it is
        drawn) is repainted: the Output panel's line count changes with every line the job
        prints, and a whole panel drawn again is its box, its children's lines composed
        again and all of it written to the terminal."""
        if title != getattr(self, "_subtitle_set", ""):
            self._subtitle_set = title
            self._bottom_only = True
            try:
                _SUBTITLE.__set__(self, title)  # Textual's own conversion, then refresh()
            finally:
                self._bottom_only = False

    _bottom_only = False

    def refresh(self, *regions: Region, **kwargs: bool) -> Self:
        if self._bottom_only and not regions and not kwargs and self.outer_size.height:
            # the bottom border line, in the content's coordinates (Textual's own)
            top, left = self.content_offset.y, self.content_offset.x
            line = Region(-left, self.outer_size.height - 1 - top, self.outer_size.width, 1)
            return super().refresh(line)
        return super().refresh(*regions, **kwargs)

    def show(self, snap: Snapshot) -> None:
        """Render ``snap``; called on the app's thread only."""

    def set_compact(self, compact: bool) -> None:
        self.compact = compact


class TextPanel(Panel, can_focus=True):
    """A panel whose body is one block of Rich text, rebuilt from each snapshot.

    Text panels are cheap (one ``Static.update`` per refresh, none when the text is the
    same as before, see :mod:`perftop.tui.widgets.quiet`) and focusable so they can be
    zoomed. Subclasses implement :meth:`render_body`. The body keeps the height of its
    tallest text until the panel's room changes (``KEEP_HEIGHT``, see QuietStatic).
    """

    KEEP_HEIGHT = True

    DEFAULT_CSS = """
    TextPanel > Static { width: 1fr; height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._body = QuietStatic("", markup=False, keep_height=self.KEEP_HEIGHT)
        self._last: Snapshot | None = None
        self._shown_key: object = None  # see body_key

    def compose(self) -> ComposeResult:
        yield self._body

    def body_key(self, snap: Snapshot) -> object:
        """All of ``snap`` that :meth:`render_body` reads, where a panel can say (None:
        drawn at every snapshot): the same key in the same room is not drawn again."""
        return None

    def show(self, snap: Snapshot) -> None:
        self._last = snap
        key = self.body_key(snap)
        if key is not None:
            key = (key, self.body_width, self.content_region.height, self.compact, self.zoomed)
            if key == self._shown_key:
                return
        self._shown_key = key
        body = self.render_body(snap)
        # One figure per line, never wrapped: a narrow panel cuts lines with an ellipsis.
        for part in body.renderables if isinstance(body, Group) else [body]:
            if isinstance(part, Text):
                part.no_wrap, part.overflow = True, "ellipsis"
        self._body.update(body)

    def set_compact(self, compact: bool) -> None:
        if compact == self.compact:
            return  # a zoom sets every panel's state again: re-rendering each costs a key
        super().set_compact(compact)
        self._body.forget_height()
        self._shown_key = None
        if self._last is not None:
            self.show(self._last)

    def on_resize(self) -> None:
        self._body.forget_height()
        self._shown_key = None
        if self._last is not None:
            self.show(self._last)

    @property
    def body_width(self) -> int:
        return max(10, self.content_region.width or self.size.width or 40)

    @property
    def zoomed(self) -> bool:
        return self.screen.maximized is self if self.is_attached else False

    def render_body(self, snap: Snapshot) -> RenderableType:
        raise NotImplementedError


def with_probe_status(snap: Snapshot, probe: str, body: RenderableType) -> RenderableType:
    """``body`` under a first line saying the panel's probe stopped and why, if it did."""
    why = snap.probe_stopped(probe)
    if not why:
        return body
    parts = body.renderables if isinstance(body, Group) else [body]
    return Group(Text(f"probe stopped: {why}", style="bold red"), *parts)
