"""A job's colours in the Output panel, as ``less -R`` shows them.

Logs that colour their lines whether or not they write to a terminal (skorch's epoch
table, loguru, a job run with ``FORCE_COLOR``) read ``^[[36m0.0916^[[0m`` in the panel,
their escapes made visible as every control character from the job is
(:mod:`perftop.safe`). Here only SGR sequences (``ESC [ params m``: colours and a few
attributes) are read, and become styles that Textual writes itself: none of the job's
bytes reaches the terminal. Every other sequence (a title, the alternate screen, a clear,
OSC 52) and every other control character is still shown visibly. Hiding (8) and
blinking (5, 6) are not taken: the panel shows all the text, steadily.

A terminal carries a colour over to the next line until a reset; here each line starts
plain (a line may be the first the panel shows, after lines it left out), which is what
the logs that colour do anyway: each coloured stretch ends with its reset.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from rich.color import Color
from rich.style import Style
from rich.text import Text

from perftop.safe import visible

_SGR = re.compile(r"\x1b\[([0-9;:]{0,64})m")


class Pen(NamedTuple):
    """The SGR state: colours (None: the line's own) and attributes."""

    fg: Color | None = None
    bg: Color | None = None
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    reverse: bool = False
    strike: bool = False


PLAIN = Pen()
_ON = {1: "bold", 2: "dim", 3: "italic", 4: "underline", 21: "underline", 7: "reverse", 9: "strike"}
_OFF = {22: ("bold", "dim"), 23: ("italic",), 24: ("underline",), 27: ("reverse",), 29: ("strike",)}


def _extended(codes: list[int], i: int) -> tuple[Color | None, int]:
    """``38;5;n`` or ``38;2;r;g;b`` from ``codes[i]`` (the 5 or 2): the colour and the index
    after it (None where the sequence is cut short or out of range)."""
    if i < len(codes) and codes[i] == 5 and i + 1 < len(codes):
        n = codes[i + 1]
        return (Color.from_ansi(n) if n < 256 else None), i + 2
    if i < len(codes) and codes[i] == 2 and i + 3 < len(codes):
        r, g, b = codes[i + 1 : i + 4]
        return (Color.from_rgb(r, g, b) if max(r, g, b) < 256 else None), i + 4
    return None, len(codes)


def _codes(params: str) -> list[int]:
    """The parameters as numbers; an empty one is 0. A colon's sub-parameters
    (``38:2::r:g:b``) read as the semicolon form, the colour space id dropped."""
    out: list[int] = []
    for part in params.split(";"):
        subs = part.split(":")
        if len(subs) == 6 and subs[1] == "2":  # 38:2:<space>:r:g:b
            subs = subs[:2] + subs[3:]
        out.extend(int(s) if s else 0 for s in subs)
    return out


def _with(pen: Pen, fields: tuple[str, ...], value: object) -> Pen:
    return Pen(**{**pen._asdict(), **dict.fromkeys(fields, value)})


@lru_cache(maxsize=512)
def pen_after(pen: Pen, params: str) -> Pen:
    """The state after one ``ESC [ params m``."""
    codes = _codes(params)
    i = 0
    while i < len(codes):
        c = codes[i]
        i += 1
        if c == 0:
            pen = PLAIN
        elif c in _ON:
            pen = _with(pen, (_ON[c],), True)
        elif c in _OFF:
            pen = _with(pen, _OFF[c], False)
        elif 30 <= c <= 37 or 90 <= c <= 97:
            pen = pen._replace(fg=Color.from_ansi(c - 30 if c < 90 else c - 82))
        elif 40 <= c <= 47 or 100 <= c <= 107:
            pen = pen._replace(bg=Color.from_ansi(c - 40 if c < 100 else c - 92))
        elif c in (38, 48):
            colour, i = _extended(codes, i)
            if colour is not None:
                pen = _with(pen, ("fg" if c == 38 else "bg",), colour)
        elif c == 39:
            pen = pen._replace(fg=None)
        elif c == 49:
            pen = pen._replace(bg=None)
    return pen


@lru_cache(maxsize=512)
def _style(pen: Pen, base: str) -> Style:
    own = Style(
        color=pen.fg,
        bgcolor=pen.bg,
        bold=pen.bold or None,
        dim=pen.dim or None,
        italic=pen.italic or None,
        underline=pen.underline or None,
        reverse=pen.reverse or None,
        strike=pen.strike or None,
    )
    return Style.parse(base) + own if base else own


def append_line(text: Text, line: str, base: str = "") -> None:
    """``line`` of the job's output appended to ``text`` in ``base`` (a style name, "" for
    none), its SGR colours as styles and every other control character visible."""
    if "\x1b[" not in line:
        text.append(visible(line, keep="\t"), style=base)
        return
    pen, at = PLAIN, 0
    for m in _SGR.finditer(line):
        if m.start() > at:
            text.append(visible(line[at : m.start()], keep="\t"), style=_style(pen, base))
        pen, at = pen_after(pen, m.group(1)), m.end()
    if at < len(line):
        text.append(visible(line[at:], keep="\t"), style=_style(pen, base))
