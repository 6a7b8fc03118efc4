"""A Static that repaints only when what it shows changed.

Textual's ``Static.update`` lays the whole screen out again and repaints the widget on
every call; panels are handed a snapshot at every refresh (2 Hz) and most of them show
the same text as before (no new hint, no new sync site, the same host figures between two
probe ticks). Comparing the text costs microseconds, a repaint milliseconds.

Lines of text that are each one line (cut, not wrapped: what text panels show) are drawn
by :class:`~perftop.tui.widgets.lines.Lines`, line by line, each kept until it changes.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual.geometry import Region
from textual.widgets import Static

from perftop.tui.widgets.lines import SUPPORTED, LinesGroup, Runs, line_count, part_key


def content_key(content: Any) -> tuple[int, tuple[Any, ...]] | None:
    """(lines, what each part shows and how) of text content; None for anything else
    (it is then always repainted)."""
    parts = content.renderables if isinstance(content, Group) else [content]
    key: list[Any] = []
    lines = 0
    for part in parts:
        if isinstance(part, str):
            key.append(part)
            lines += part.count("\n") + 1
        elif (k := part_key(part)) is not None:
            key.append(k)
            lines += line_count(part)
        else:
            return None
    return lines, tuple(key)


def _one_line_each(parts: tuple[Any, ...]) -> bool:
    return all(
        isinstance(p, Runs) or (isinstance(p, Text) and (p.no_wrap or not p.plain)) for p in parts
    )


_STATIC_CONTENT, _STATIC_VISUAL = "_Static__content", "_Static__visual"  # Static's own


def _changed_lines(last: Any, key: tuple[int, tuple[Any, ...]]) -> list[int] | None:
    """The lines whose text changed from ``last`` to ``key``, where each part is a line
    (None: not so, or not known)."""
    if last is None or not last[0] == len(last[1]) == key[0] == len(key[1]):
        return None
    return [y for y, (was, now) in enumerate(zip(last[1], key[1], strict=True)) if was != now]


class QuietStatic(Static):
    """``update`` with the same text as the last is a no-op; with as many lines as the
    last, it repaints the widget without laying the screen out again.

    ``keep_height``: text of fewer lines than the tallest shown since :meth:`forget_height`
    gets blank lines below it, so the widget keeps its height. A line count that comes and
    goes (a figure that fits its line or not) would otherwise lay the whole screen out
    twice each time (Textual lays it out again when the widget's size changes)."""

    _shown_key: tuple[int, tuple[Any, ...]] | None = None
    _tallest = 0

    def __init__(self, *args: Any, keep_height: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keep_height = keep_height
        self._strips: dict[Any, Any] = {}  # Lines' strips of the last repaint
        # perftop's text has no links: Textual's pass over every segment for them is moot
        self.set_reactive(Static.auto_links, False)

    def forget_height(self) -> None:
        """The next text sets the height (the widget's room changed: a resize, a zoom)."""
        self._tallest = 0

    def update(self, content: Any = "", *, layout: bool = True) -> None:
        key = content_key(content)
        if key is not None and self.keep_height:
            if key[0] < self._tallest:
                parts = content.renderables if isinstance(content, Group) else [content]
                content = Group(*parts, *[Text("") for _ in range(self._tallest - key[0])])
                key = content_key(content)
            self._tallest = max(self._tallest, key[0])  # type: ignore[index]
        last = self._shown_key
        if key is not None and key == last:
            return
        lines = tuple(content.renderables) if isinstance(content, Group) else ()
        one_each = bool(lines) and _one_line_each(lines)
        if key is not None and last is not None and key[0] == last[0] and one_each:
            # as many lines: the size stays, only this widget repaints (text that may wrap,
            # as a lone Text does to the widget's width, has a count of lines not known here)
            layout = False
        self._shown_key = key
        if SUPPORTED and key is not None and one_each:
            content = LinesGroup(self, self._strips, *lines)  # type: ignore[arg-type]
            changed = None if layout else _changed_lines(last, key)
            if changed is not None and _STATIC_VISUAL in vars(self):
                # what Static.update sets, but only the lines that changed are repainted
                vars(self).update({_STATIC_CONTENT: content, _STATIC_VISUAL: content.visualize()})
                self.refresh(*(Region(0, y, self.size.width, 1) for y in changed), layout=False)
                return
        super().update(content, layout=layout)
