"""Is a process still there? One answer for the lifecycle, `perftop ls` and the observer."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (ended, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
