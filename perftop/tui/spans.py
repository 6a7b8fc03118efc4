"""A screen whose partial updates read only the lines that changed.

Textual's compositor answers a partial update (a few widgets repainted) by taking the box
around every dirty region, then asking each widget inside that box for all its lines: the
header changes at the top and the Output panel's count at the bottom, so at each snapshot
every panel's every line was fetched from its cache, filtered and cut, to write out the
dozen lines that changed. :class:`SpanCompositor` asks each widget only for its lines under
a dirty region, and skips a widget under none, or under none that a widget in front of it
holds whole (a panel's box behind its changed line). What is written is the same: the update
writes only the dirty regions' spans, and those come from the same widgets, front to back
(``tests/tui/test_spans.py`` compares both updates' bytes, less the cursor moves Textual
writes for a chop it cuts to nothing).

It leans on the compositor's own private parts (``_dirty_regions``, ``_get_renders``): its
partial update is Textual's own, told which regions are dirty; where a Textual lacks one of
them, the screen keeps Textual's own compositor (``SUPPORTED``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.geometry import Region
from textual.screen import Screen

try:
    from textual._compositor import Compositor
except ImportError:  # pragma: no cover - a Textual without them draws as it always did
    SUPPORTED = False
else:
    SUPPORTED = all(
        hasattr(Compositor, name)
        for name in ("_get_renders", "render_partial_update", "visible_widgets")
    )


if SUPPORTED:

    class SpanCompositor(Compositor):
        """Partial updates fetch each widget's lines under the dirty regions only."""

        _only: list[Region] | None = None

        def render_partial_update(self) -> Any:
            """Textual's own, with the dirty regions known to :meth:`_get_renders`."""
            screen = self.size.region
            self._only = [r.intersection(screen) for r in self._dirty_regions]
            try:
                return super().render_partial_update()
            finally:
                self._only = None

        def _get_renders(self, crop: Region | None = None) -> Iterable[Any]:
            only = self._only
            if only is None:  # a full update, a screenshot: Textual's own
                yield from super()._get_renders(crop)
                return
            # Front to back, as Textual paints: a cell goes to the first widget whose lines
            # hold it. A dirty region wholly inside a widget already fetched is covered:
            # the widgets behind it (its panel's box, containers, the screen) would be
            # fetched for it only to lose every cell of it.
            open_ = list(only)
            for widget, (region, clip) in self.visible_widgets.items():
                if not open_:
                    return
                visible = region.intersection(clip)
                top, bottom = visible.bottom, visible.y
                for r in open_:
                    hit = r.intersection(visible)
                    if hit:
                        top, bottom = min(top, hit.y), max(bottom, hit.bottom)
                if bottom <= top:
                    continue  # under no open dirty region: nothing of it is written
                open_ = [r for r in open_ if not visible.contains_region(r)]
                part = Region(visible.x, top, visible.width, bottom - top)
                lines = Region(part.x - region.x, part.y - region.y, part.width, part.height)
                yield part, part, widget.render_lines(lines)


class MainScreen(Screen[Any]):
    """The app's first screen, drawn through :class:`SpanCompositor` where supported."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if SUPPORTED:
            self._compositor = SpanCompositor()
