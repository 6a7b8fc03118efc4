"""The lines a terminal shows for a job's output.

A progress bar (tqdm, a download meter) rewrites its line in place: each update starts
with a carriage return and only the last one ends with a newline. Split on every ``\\r``
as ``str.splitlines`` does, such a bar became a line per update, hundreds a minute, and
pushed the job's own log lines out of the Output panel. Here a line rewritten with ``\\r``
is kept as its last state, as a terminal leaves it (its longest earlier state's tail, which
a terminal would still show past a shorter last one, is not kept: bars pad themselves).

A nested bar (tqdm's ``position``, the HF Trainer's evaluation bar under its training bar)
goes back to its line with a cursor move: it writes its state, moves up (``ESC[A``) and
down again (a newline) before the next state. That pair is a return to the line's start
here, as it is on a terminal; the other moves and erases bars write within a line
(``ESC[nA``..``ESC[nG``, ``ESC[K``, hiding and showing the cursor) are dropped: a terminal
does them and shows nothing (they read ``^[[A`` in the Output panel). Every other escape
stays, for :func:`perftop.safe.visible` to show.

A line is kept to its first ``LINE_CHARS`` characters, the rest counted: output with no
newline comes in pieces of 64 KiB, and the screen's 2,000 lines of the model and 5,000 of
the Output panel held whole grew perftop by half a gigabyte under such a flood. The
recording keeps each piece whole.
"""

from __future__ import annotations

import re

LINE_CHARS = 4096
_UP_AND_DOWN = "\x1b[A\n"  # a nested bar back on its own line: its next state rewrites it
_MOVES = re.compile(r"\x1b\[(?:[0-9]*[ABCDEFGK]|\?25[hl])")


def terminal_lines(text: str) -> list[str]:
    """``text``'s lines, each rewritten line as its last non-empty state and cut to
    ``LINE_CHARS``; ``[""]`` for an empty text. A ``\\r\\n`` ends a line as ``\\n`` does."""
    if "\x1b[" in text:
        text = _MOVES.sub("", text.replace(_UP_AND_DOWN, "\r"))
    pieces = text.replace("\r\n", "\n").split("\n")
    if len(pieces) > 1 and pieces[-1] == "":
        pieces.pop()  # the text ended with a newline
    out: list[str] = []
    for piece in pieces:
        if "\r" in piece:
            piece = next((s for s in reversed(piece.split("\r")) if s), "")
        out.extend(_cut(line) for line in piece.splitlines() or [""])  # the others, as before
    return out


def _cut(line: str) -> str:
    if len(line) <= LINE_CHARS:
        return line
    return f"{line[:LINE_CHARS]} … [perftop: {len(line) - LINE_CHARS:,} more characters]"
