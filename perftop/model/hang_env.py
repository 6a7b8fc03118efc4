"""The hang thresholds as a reader's environment sets them (``PERFTOP_HANG_FACTOR``,
``PERFTOP_HANG_AFTER``): they win over those a session was run with, so a reader may judge
a recording again with thresholds of its own; the monitor's header says them."""

from __future__ import annotations

import math
import os
from typing import Any


def positive(v: Any) -> float | None:
    """``v`` as a threshold: a positive number, else None (not set)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f > 0 and math.isfinite(f) else None


def hang_env() -> tuple[float | None, float | None]:
    """The hang thresholds this process's environment sets (None: not set)."""
    env = os.environ
    return positive(env.get("PERFTOP_HANG_FACTOR")), positive(env.get("PERFTOP_HANG_AFTER"))
