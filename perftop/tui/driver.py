"""Textual's terminal driver, sized by the terminal itself.

Textual asks :func:`shutil.get_terminal_size`, which prefers ``COLUMNS``/``LINES`` from the
environment. Where a shell exports them (some do, for scripts), every resize is read as that
stale size and the layout is cut or half-painted. The terminal's own size wins here; the
variables stay in the environment, so the job sees them as it would without perftop.
Its input thread sleeps until there is input (:mod:`perftop.tui.input_thread`).
"""

from __future__ import annotations

import os
from typing import Any

from textual.driver import Driver

from perftop.tui.input_thread import QuietInput


def sized(base: type[Driver]) -> type[Driver]:
    """``base`` itself, or (Textual's Linux driver) a subclass that asks the terminal and
    whose input thread does not poll."""
    from textual.drivers.linux_driver import LinuxDriver

    if not issubclass(base, LinuxDriver):
        return base

    class TerminalSizedDriver(QuietInput, base):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if getattr(self, "_size", None) is None:
                # Textual's App.size, asked before the first Resize arrives (on a busy
                # host: at mount), falls back to the console's size (COLUMNS/LINES) and
                # keeps it here: the terminal's own size instead.
                self._size = self._get_terminal_size()

        def _get_terminal_size(self) -> tuple[int, int]:
            out: Any = getattr(self, "_file", None)
            for fd in _fds(out):
                try:
                    size = os.get_terminal_size(fd)
                except (OSError, ValueError):
                    continue
                if size.columns and size.lines:
                    return size.columns, size.lines
            return super()._get_terminal_size()

    return TerminalSizedDriver


def _fds(out: Any) -> list[int]:
    fds = []
    try:
        fds.append(out.fileno())
    except Exception:
        pass
    return fds + [fd for fd in (2, 1, 0) if fd not in fds]
