"""Nothing the job wrote reaches the real terminal raw, whichever widget shows it.

Each panel shows a string from outside perftop through :func:`perftop.safe.visible`, which
writes its control characters visibly (``^[``) and so keeps the line's width right. This
mixin is the net under them all, for a path a panel forgot:

- a line filter drops every control character still in a rendered line, just before the
  line is written to the terminal (Rich counts such a character as zero cells wide, so the
  line's width is unchanged and the layout holds);
- notifications are shown as plain text (never Textual markup, which a file name in
  brackets would otherwise be read as) and through :func:`perftop.safe.visible`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter
from textual.notifications import SeverityLevel

from perftop.safe import visible, visible_line

# Controls go (zero cells wide); a lone surrogate, one cell wide, becomes U+FFFD.
_DROP: dict[int, str | None] = {c: None for c in (*range(0x20), *range(0x7F, 0xA0))}
_DROP.update({c: "\ufffd" for c in range(0xD800, 0xE000)})


class DropControls(LineFilter):
    """Every C0 and C1 control character, ESC first, removed from each rendered line."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        text = "".join([s.text for s in segments if s.control is None])
        if visible_line(text) is text:  # one search a line (not one a segment: ~40 a line)
            return segments  # the usual case: nothing to drop, the line as it was
        out = []
        for seg in segments:
            if seg.control is None:
                seg = Segment(seg.text.translate(_DROP), seg.style)
                if not seg.text:
                    continue
            out.append(seg)
        return out


DROP_CONTROLS = DropControls()


class SafeText:
    """Mixed into the app, before ``App``."""

    def get_line_filters(self) -> Sequence[LineFilter]:
        parent: Any = super()
        return [*parent.get_line_filters(), DROP_CONTROLS]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        parent: Any = super()
        parent.notify(
            visible(message), title=visible_line(title), severity=severity, timeout=timeout,
            markup=markup,
        )  # fmt: skip
