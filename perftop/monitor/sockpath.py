"""Where the monitor's socket goes: the first of the usual bases (``$XDG_RUNTIME_DIR``,
``$TMPDIR``, ``/tmp``...) that is writable and short enough for a socket's whole path. It
stands alone because ``perftop ls`` and the TUI's failure screen look there too, with no
server of their own.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from perftop.monitor.sockdir import private_dir, private_dirs

SUFFIX = ".sock"
SUN_PATH_MAX = 107  # bytes of a Unix socket's path: sun_path's 108, less the NUL
SOCKET_NAME_MAX = len(f"{1 << 22}-{'0' * 8}{SUFFIX}")  # PID-RANDOM.sock, the largest pid
FALLBACK_BASES = ("/tmp", "/var/tmp", "/dev/shm")


def socket_bases() -> list[str]:
    """Where this user's socket directory may go, first choice first: those of
    ``$XDG_RUNTIME_DIR``, the temporary directory (``$TMPDIR``), ``/tmp``, ``/var/tmp`` and
    ``/dev/shm`` that are writable directories where a socket's whole path fits in
    ``SUN_PATH_MAX`` bytes (a long ``$TMPDIR`` does not stop the job)."""
    out: list[str] = []
    for base in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), *FALLBACK_BASES):
        if not base or base in out:
            continue
        longest = os.path.join(base, f"perftop-{os.geteuid()}-XXXXXXXX", "x" * SOCKET_NAME_MAX)
        if len(os.fsencode(longest)) <= SUN_PATH_MAX and os.access(base, os.W_OK | os.X_OK):
            out.append(base)
    return out


def socket_base() -> str:
    """The first of :func:`socket_bases`; an :class:`OSError` (``ENAMETOOLONG``) when there
    is none: the caller runs the job without its socket, saying so."""
    bases = socket_bases()
    if not bases:
        raise OSError(
            errno.ENAMETOOLONG,
            f"no writable directory where a socket's path fits in {SUN_PATH_MAX} bytes "
            "($XDG_RUNTIME_DIR, $TMPDIR, " + ", ".join(FALLBACK_BASES) + ")",
        )
    return bases[0]


def socket_dir() -> Path:
    """A private directory for this user's perftop sockets (``sockdir.private_dir`` in
    :func:`socket_base`); an :class:`OSError` when none can be had."""
    return private_dir(socket_base())


def socket_dirs() -> list[Path]:
    """Every directory of this user's sessions in every possible base, for ``perftop ls``
    (none made)."""
    out: list[Path] = []
    for base in socket_bases():
        out.extend(d for d in private_dirs(base) if d not in out)
    return out
