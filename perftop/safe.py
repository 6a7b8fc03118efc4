"""Text that did not come from perftop, made safe for a terminal: the one place that does it.

A job's output, a process's command line, a file or function name from a job's stack, a
recording's text, a peer's hello: any of them can carry escape sequences (set the window's
title, switch to the alternate screen, turn on mouse reporting, write the clipboard with
OSC 52) that a terminal obeys when they reach it byte for byte. Every path that shows such
a string shows ``visible(text)`` instead: each control character is written visibly, as
``less`` and ``ls`` do (``^[`` for ESC, ``^G`` for BEL, ``^?`` for DEL, ``<9B>`` for a C1
control), and nothing else of it passes through.

- Tabs and newlines are kept (``keep``): they only move the cursor on a line or to the next.
  A carriage return is not kept: the job's output has been cut into lines as a terminal
  leaves them (:mod:`perftop.model.terminal`) before it gets here.
- A lone surrogate (a byte that was not UTF-8, decoded with ``surrogateescape``) is shown as
  that byte, ``<9B>``: written as is, it would raise when encoded for the terminal.
- The Unicode controls that reorder or break lines behind the reader's back (bidirectional
  overrides and isolates, the line and paragraph separators) are shown as ``<U+202E>``.

Standard library only, and a string with nothing to change is returned as is, fast: the
Output panel calls this for every line it shows.
"""

from __future__ import annotations

import re
from functools import lru_cache

_C0 = range(0x00, 0x20)
_C1 = range(0x80, 0xA0)
_ESCAPED_BYTES = range(0xDC80, 0xDD00)  # surrogateescape's bytes 0x80-0xFF
_SURROGATES = range(0xD800, 0xE000)
_UNICODE_CONTROLS = (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _shown(code: int) -> str:
    if code in _C0:
        return "^" + chr(code + 0x40)  # ^@ .. ^_ (ESC is ^[)
    if code == 0x7F:
        return "^?"
    if code in _C1:
        return f"<{code:02X}>"
    if code in _ESCAPED_BYTES:
        return f"<{code - 0xDC00:02X}>"
    return f"<U+{code:04X}>"


@lru_cache(maxsize=8)
def _table(keep: str) -> dict[int, str]:
    codes = (*_C0, 0x7F, *_C1, *_SURROGATES, *_UNICODE_CONTROLS)
    kept = {ord(c) for c in keep}
    return {c: _shown(c) for c in codes if c not in kept}


def visible(text: str, keep: str = "\t\n") -> str:
    """``text`` with every control character shown visibly (``^[``, ``<9B>``) instead of
    passed to the terminal; the characters in ``keep`` (tab and newline unless told) stay."""
    if _UNSAFE.search(text) is None:
        return text
    return text.translate(_table(keep))


def visible_line(text: str) -> str:
    """One line's worth of ``text``: a tab or a newline shown too (a table cell, a name)."""
    return visible(text, keep="")
