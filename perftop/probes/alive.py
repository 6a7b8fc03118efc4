"""Is a process still there? One answer for the lifecycle, `perftop ls` and the observer."""

from __future__ import annotations

import psutil


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (ended, its parent has not reaped it yet) is gone
    for our purpose."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except (psutil.AccessDenied, ValueError):
        return True
