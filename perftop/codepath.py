"""How a file of code is named on screen and in reports: a library's from its folder in
site-packages on (``ignite/engine/__init__.py``), which names one file where its name alone
(``__init__.py``, ``trainer.py``) names many; any other by its name (``train.py``).

Standard library only, and nothing of perftop's: the hook names a pass's function with it
(perftop/hook/pass_names.py) and the monitor's side names stack frames and collectives'
lines with it, so the two say the same.
"""

from __future__ import annotations

SITE_DIRS = ("/site-packages/", "/dist-packages/")


def library_path(path: str) -> str | None:
    """``path`` from its site-packages (or dist-packages) folder on, ``/`` between its
    parts; None for a file outside them (the user's, the standard library's)."""
    p = path.replace("\\", "/")
    for d in SITE_DIRS:
        i = p.rfind(d)
        if i >= 0:
            return p[i + len(d) :] or None
    return None


def code_file(path: str) -> str:
    """A library's file from its package's folder on, any other file by its name."""
    return library_path(path) or path.replace("\\", "/").rsplit("/", 1)[-1]


def code_line(line: str) -> str:
    """A ``path:line function`` (or ``path:line``) with its file named as
    :func:`code_file` names it: ``ignite/engine/__init__.py:689 evaluate_step``; with no
    file before its colon, what follows it."""
    file, _, rest = line.rpartition(":")
    return f"{code_file(file)}:{rest}" if file else rest
