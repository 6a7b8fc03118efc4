"""Standard streams that a shell closed (``perftop run … <&-`` or ``>&-``) made safe before
anything runs: each of fds 0, 1 and 2 that is not open is opened on ``/dev/null``, and a
``sys.stdin``/``sys.stdout``/``sys.stderr`` that Python left as ``None`` is bound to it.

Without it a closed stream is ``None`` in ``sys`` (``AttributeError`` at the first
``isatty``), and the next file perftop opens takes the free fd 0, 1 or 2, where the job
would then read or write it. The job gets what perftop has: ``/dev/null`` where its
stream was closed, as ``nohup`` does.
"""

from __future__ import annotations

import io
import os
import sys

_NAMES = ("stdin", "stdout", "stderr")


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def ensure_std_fds() -> list[int]:
    """Open each closed fd of 0, 1, 2 on ``/dev/null`` (read for 0, write for 1 and 2),
    and bind its ``sys`` stream if Python had none; returns the fds it opened."""
    opened = []
    for fd in (0, 1, 2):
        if not _closed(fd):
            continue
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if null != fd:  # the lowest free fd: a lower one of the three may still be closed
            os.dup2(null, fd)
            os.close(null)
        os.set_inheritable(fd, True)
        opened.append(fd)
    for fd, name in enumerate(_NAMES):
        if getattr(sys, name) is None:
            mode = "r" if fd == 0 else "w"
            stream = io.TextIOWrapper(
                io.FileIO(fd, mode, closefd=False),
                encoding="utf-8",
                errors="backslashreplace",
                line_buffering=fd != 0,
            )
            setattr(sys, name, stream)
    return opened
