"""Where an op capture's raw trace goes, and how it is written there.

The monitor names the place (``CaptureAsk.trace_prefix``: beside the session's recording,
or in its private socket directory) and the hook writes the file as the job's user. So
the hook takes only a name perftop itself would choose, ``[<recording>.]capture-<id>-``
with the ask's own capture id, to which it adds its pid and ``.trace.json``; and it
creates the file new (``O_EXCL``), through no link (``O_NOFOLLOW``), mode 0600: a name
that exists already, a planted link above all, gets no trace. The profiler writes to a
private temporary directory first (it opens the path it is given itself, with no such
flags); the trace is copied from there.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable

_PREFIX = re.compile(r"(?:.+\.)?capture-([0-9a-f]{8})-\Z")
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def trace_path(prefix: str, capture_id: str, pid: int) -> str | None:
    """The trace's path for ``prefix``, or None when ``prefix`` is not a name perftop
    gives (another file's name, or another capture's)."""
    directory, base = os.path.split(prefix)
    m = _PREFIX.match(base)
    if m is None or m.group(1) != capture_id:
        return None
    return os.path.join(directory, f"{base}{pid}.trace.json")


def write_trace(export: Callable[[str], object], path: str) -> None:
    """``export(some_path)`` writes the trace; it ends at ``path``, a new file of this
    user's. Raises ``OSError`` when ``path`` exists (or is a link) or cannot be made."""
    tmp = tempfile.mkdtemp(prefix="perftop-trace-")
    try:
        src = os.path.join(tmp, "trace.json")
        export(src)
        fd = os.open(path, _FLAGS | getattr(os, "O_CLOEXEC", 0), 0o600)
        with open(fd, "wb") as out, open(src, "rb") as f:
            shutil.copyfileobj(f, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
