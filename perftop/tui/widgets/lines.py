"""A panel's lines drawn straight to Textual strips, each line kept until it changes.

Textual draws a Rich ``Group`` of lines through Rich's console at each repaint: every
line is rendered, styled and split again, the unchanged ones included, and the Steps
chart's lines (a run of styled cells per phase, every one of them shifted when a step
arrives, twice a second) are the dearest of all. :class:`Lines` draws each line apart:

- a :class:`Runs` line (``(text, style)`` runs, as the Steps chart builds them) is one
  segment per run, with no Rich text in between;
- a Rich ``Text`` line goes through Rich as it did in the ``Group``, and its strips are
  kept (by what it shows, the width and the base style) until a repaint no longer shows
  it, so a line that did not change costs a look-up.

The strips are the ones the ``Group`` gave, segment for segment (tests compare them).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Group
from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.strip import Strip
from textual.visual import RenderOptions, Visual

# The visual protocol as this module implements it (Textual 2 and later); with an older
# Textual, text panels draw through Rich as before.
SUPPORTED = "options" in inspect.signature(Visual.render_strips).parameters

if TYPE_CHECKING:
    from textual.css.styles import RulesMap
    from textual.style import Style
    from textual.widget import Widget


class Runs(tuple[tuple[str, str], ...]):
    """One line as ``(text, style)`` runs (``""``: no style); one cell per character."""

    __slots__ = ()

    def __rich__(self) -> Text:
        return self.to_text()

    def to_text(self) -> Text:
        # cut, never wrapped: a line drawn at a width other than its own (the old lines
        # at a resize, before the panel shows them anew) stays one line, as every line
        # of a text panel is (``QuietStatic`` repaints only the lines whose text changed)
        t = Text(no_wrap=True, overflow="crop")
        for text, style in self:
            t.append(text, style=style or None)
        return t

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self)


Line = Text | Runs


def part_key(part: Any) -> Any:
    """What a line shows and how (None: not a line this module draws)."""
    if isinstance(part, Runs):
        return part
    if isinstance(part, Text):
        spans = tuple(part.spans)
        return (
            part.plain,
            str(part.style),
            spans,
            part.justify,
            part.overflow,
            part.no_wrap,
            part.end,
        )
    return None


def line_count(part: Any) -> int:
    return 1 if isinstance(part, Runs) else part.plain.count("\n") + 1


def text_segments(
    text: Text, width: int, base: RichStyle, get_style: Callable[..., RichStyle]
) -> list[Segment] | None:
    """The segments Rich draws for one line of ``text`` whose spans do not overlap, in the
    widget's ``base`` style, without its wrapping, joining and splitting (a few times
    faster: the header's line 225 µs, 47 here); None where Rich would do more than that
    (a line break, a tab, a justified or overlong line, nested spans)."""
    plain = text.plain
    if (
        not plain
        or text.justify not in (None, "default")
        or "\n" in plain
        or "\t" in plain
        or text.end != "\n"
        or cell_len(plain) > width
    ):
        return None
    null = RichStyle.null()
    own = get_style(text.style, default=null) if text.style else null
    gap = base + own
    if not text.spans:
        return [Segment(plain, gap)]
    segments: list[Segment] = []
    at = 0
    for span in sorted(text.spans, key=lambda s: s.start):
        start, end = span.start, span.end
        if start < at or end > len(plain):
            return None  # nested or overlapping spans: Rich combines them
        if start > at:
            segments.append(Segment(plain[at:start], gap))
        if end > start:
            style = own + get_style(span.style, default=null)
            segments.append(Segment(plain[start:end], base + style))
            at = end
    if at < len(plain):
        segments.append(Segment(plain[at:], gap))
    return segments


class LinesGroup(Group):
    """A Rich ``Group`` of one-line parts that Textual draws as :class:`Lines` (Rich
    prints it as the ``Group`` it is)."""

    def __init__(self, widget: Widget, cache: dict[Any, list[Strip]], *parts: Line) -> None:
        super().__init__(*parts)
        self._lines = (widget, cache)

    def visualize(self) -> Lines:
        return Lines(self._lines[0], self.renderables, self._lines[1])  # type: ignore[arg-type]


class Lines(Visual):
    """Lines of text (``Text`` or :class:`Runs`) as a Textual visual, drawn line by line.
    ``cache``: the widget's strips of the last repaint, by line (see the module)."""

    def __init__(
        self, widget: Widget, parts: Sequence[Line], cache: dict[Any, list[Strip]]
    ) -> None:
        self._widget = widget
        self.parts = tuple(parts)
        self._cache = cache

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return max((len(p.plain) for p in self.parts), default=0)

    def get_height(self, rules: RulesMap, width: int) -> int:
        return sum(line_count(p) for p in self.parts)

    def render_strips(
        self, width: int, height: int | None, style: Style, options: RenderOptions
    ) -> list[Strip]:
        base = style.rich_style
        old: dict[Any, list[Strip]] = self._cache
        new: dict[Any, list[Strip]] = {}
        styles: dict[str, RichStyle] = {}  # a run's style over the base, as Rich adds them
        strips: list[Strip] = []
        for part in self.parts:
            key = (part_key(part), width, base)
            got = old.get(key) or new.get(key)
            if got is None:
                got = self._draw(part, width, base, styles)
            new[key] = got
            strips.extend(got)
            if height is not None and len(strips) >= height:
                break
        old.clear()
        old.update(new)
        return strips[:height] if height is not None else strips

    def _draw(
        self, part: Line, width: int, base: RichStyle, styles: dict[str, RichStyle]
    ) -> list[Strip]:
        if isinstance(part, Runs) and sum(len(t) for t, _ in part) <= width:
            get = self._widget.app.console.get_style
            segments = []
            for t, s in part:
                if t:
                    if (st := styles.get(s)) is None:
                        st = styles[s] = base + (get(s) if s else RichStyle())
                    segments.append(Segment(t, st))
            return [Strip(segments)]
        if isinstance(part, Text) and self._widget._get_justify_method() is None:
            drawn = text_segments(part, width, base, self._widget.app.console.get_style)
            if drawn is not None:
                return [Strip(drawn)]
        return self.rich_draw(part, width, base)

    def rich_draw(self, part: Line, width: int, base: RichStyle) -> list[Strip]:
        """The line drawn through Rich, as Textual draws a ``Group``'s."""
        text = part.to_text() if isinstance(part, Runs) else part
        console = self._widget.app.console
        opts = self._widget.app.console_options.update(highlight=False, width=width)
        rendered = console.render(self._widget.post_render(text, base), opts)
        lines = Segment.split_and_crop_lines(rendered, width, include_new_lines=False, pad=False)
        return [Strip(line) for line in lines]
