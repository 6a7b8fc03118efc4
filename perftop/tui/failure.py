"""When the TUI itself fails: the traceback goes to a file, the user gets one line.

Textual's own handling of an exception in the app paints a full-screen traceback and
returns from ``App.run`` as if the user had quit; a caller that then stops the job loses
the training. :class:`perftop.tui.app.PerftopApp` keeps a :class:`TuiFailure` instead, so
that each flow can do what fails open for it: ``run`` leaves the job running, detached as
the ``l`` key does; a viewer exits non-zero.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from perftop.errors import ScreenFailed


@dataclass(frozen=True, slots=True)
class TuiFailure:
    what: str  # "ScreenStackError: Can't pop screen; …", one line
    saved: Path | None  # the traceback's file; None when it could not be written

    @property
    def text(self) -> str:
        where = f"traceback in {self.saved}" if self.saved is not None else "no traceback saved"
        return f"the screen failed ({self.what}); {where}"

    @property
    def line(self) -> str:
        return f"perftop: {self.text}"

    def error(self) -> ScreenFailed:
        """What a viewer raises: the CLI prints it in one line and exits non-zero."""
        return ScreenFailed(self.text)


def failure_of(error: BaseException, directory: Path | None = None) -> TuiFailure:
    """``error`` in one line, its traceback written to a private file of this user's."""
    first = (str(error).strip().splitlines() or [""])[0]
    what = f"{type(error).__name__}: {first}" if first else type(error).__name__
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return saved_failure(what, text, directory)


def panic_failure(renderables: tuple[object, ...]) -> TuiFailure:
    """What Textual was told to show on a panic (a driver's thread failed: reading a
    terminal that hung up fails with EIO), as one line and a file: for a traceback, its
    last line, the exception."""
    from io import StringIO

    from rich.console import Console

    out = StringIO()
    Console(file=out, width=120, color_system=None, legacy_windows=False).print(*renderables)
    text = out.getvalue()
    lines = [ln.strip(" │╰─╯") for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    return saved_failure(lines[-1] if lines else "the terminal failed", text)


def saved_failure(what: str, text: str, directory: Path | None = None) -> TuiFailure:
    """``what`` (one line), with ``text`` (the traceback) written to a private file."""
    try:
        if directory is None:
            # here, not at the top: a replay viewer runs where the monitor cannot (another
            # OS, no psutil), and needs this only once its screen failed
            from perftop.monitor.sockpath import socket_dir

            directory = socket_dir()
        d = directory
        path = d / f"tui-failure-{os.getpid()}-{time.strftime('%Y%m%d-%H%M%S')}.txt"
        path.write_text(text)
    except Exception:  # no private directory here (another OS, no permission)
        return TuiFailure(what, None)
    return TuiFailure(what, path)
