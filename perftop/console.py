"""perftop's own lines to the terminal: stderr, which may be gone.

A lost ssh session or a closed pipe must never turn a message into a traceback, and
``--stream-out`` shares stderr with a reader that can leave at any time. A line may carry
text perftop did not write (a command line, a file name, a recording's text): it is shown
through :func:`perftop.safe.visible` (one line: :func:`perftop.safe.visible_line`), never raw.
"""

from __future__ import annotations

import sys

from perftop.safe import visible, visible_line


def interactive() -> bool:
    """A person at a terminal on both ends: only then may a TUI take the screen."""
    return sys.stdout.isatty() and sys.stdin.isatty()


def say(line: str) -> None:
    """One line to stderr, flushed; nothing when nobody can read it any more. One line
    whatever it holds: a newline in a job's name is shown (``^J``), not a line of its own."""
    try:
        print(visible_line(line), file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a closed terminal, pipe or file
        pass


def out(text: str) -> None:
    """``text`` to stdout as is, but for its control characters, shown visibly."""
    sys.stdout.write(visible(text))
