"""The user's own directory for perftop's sockets, made safely in a shared base (``/tmp``).

``$base/perftop-<uid>`` is used only when ``lstat`` shows a real directory (not a link)
that this user owns and nobody else may enter (mode 0700). Anyone can create that name
first in ``/tmp``: a neighbour's directory, a link, a file. Such a name is never chmod-ed,
chown-ed or written into (that left the neighbour as its owner, free to swap the session's
socket for their own, and denied every later run with a traceback); perftop makes a fresh
private directory beside it instead, ``perftop-<uid>-XXXXXXXX`` (``mkdtemp``: created 0700,
never an existing name), and keeps using it while it lasts. :func:`private_dirs` lists
every directory of this user's sessions, for ``perftop ls``.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def _ours(path: Path, fix_mode: bool = False) -> bool:
    """Whether ``path`` is a real directory of this user that only it may enter. With
    ``fix_mode``, one of ours that others may enter is closed to them (through a descriptor
    opened without following a link: what is changed is what was checked)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:  # missing, a link, not a directory, not ours to open
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return False
        if stat.S_IMODE(st.st_mode) & 0o077:
            if not fix_mode:
                return False
            os.fchmod(fd, 0o700)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _fallbacks(base: Path) -> list[Path]:
    """This user's earlier fresh directories in ``base`` (only its own), oldest name first."""
    try:
        names = sorted(n for n in os.listdir(base) if n.startswith(f"perftop-{os.geteuid()}-"))
    except OSError:
        return []
    return [base / n for n in names if _ours(base / n)]


def private_dir(base: str | os.PathLike[str]) -> Path:
    """This user's socket directory in ``base``: ``perftop-<uid>`` when it is safely its
    own (made here when missing), else a fresh ``perftop-<uid>-XXXXXXXX`` of its own.
    Raises ``OSError`` only when ``base`` takes no directory at all."""
    base = Path(base)
    d = base / f"perftop-{os.geteuid()}"
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    except OSError:
        pass  # a name we cannot make: the fresh one below says why, if it fails too
    if _ours(d, fix_mode=True):
        return d
    earlier = _fallbacks(base)
    if earlier:
        return earlier[0]
    return Path(tempfile.mkdtemp(prefix=f"perftop-{os.geteuid()}-", dir=base))


def private_dirs(base: str | os.PathLike[str]) -> list[Path]:
    """Every directory of this user's sockets in ``base`` (the usual one and fresh ones),
    nothing of anyone else's; none is created."""
    base = Path(base)
    d = base / f"perftop-{os.geteuid()}"
    return ([d] if _ours(d) else []) + _fallbacks(base)
