"""A Static that repaints only when what it shows changed.

Textual's ``Static.update`` lays the whole screen out again and repaints the widget on
every call; panels are handed a snapshot at every refresh (2 Hz) and most of them show
the same text as before (no new hint, no new sync site, the same host figures between two
probe ticks). Comparing the text costs microseconds, a repaint milliseconds.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual.widgets import Static


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
        elif isinstance(part, Text):
            key.append(
                (
                    part.plain,
                    str(part.style),
                    tuple(part.spans),
                    part.justify,
                    part.overflow,
                    part.no_wrap,
                    part.end,
                )
            )
            lines += part.plain.count("\n") + 1
        else:
            return None
    return lines, tuple(key)


class QuietStatic(Static):
    """``update`` with the same text as the last is a no-op; with as many lines as the
    last, it repaints the widget without laying the screen out again."""

    _shown_key: tuple[int, tuple[Any, ...]] | None = None

    def update(self, content: Any = "", *, layout: bool = True) -> None:
        key = content_key(content)
        last = self._shown_key
        if key is not None and key == last:
            return
        if key is not None and last is not None and key[0] == last[0]:
            layout = False  # as many lines: the size stays, only this widget repaints
        self._shown_key = key
        super().update(content, layout=layout)
