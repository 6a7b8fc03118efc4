"""Which implementation runs the hot path: the C extension ``perftop.hook._speedups`` (the
tracker and the torch wrappers, no Python frame per step) when it is built and imports,
else the pure-Python reference in ``steps.py`` and ``torch_patch.py``.

``PERFTOP_PURE=1`` forces the pure-Python path. A missing or unloadable extension (not
compiled, or the hook loaded by path into another Python version) falls back silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from perftop.hook import steps


def _load() -> ModuleType | None:
    if os.environ.get("PERFTOP_PURE", "").strip() not in ("", "0"):
        return None
    try:
        from perftop.hook import _speedups

        _speedups.configure(steps.SOURCES, steps.HOLD_STEPS, steps.HOLD_S)
        return _speedups
    except Exception:  # not built, built for another Python, broken: the reference runs
        return None


speedups = _load()
NAME = "C (perftop.hook._speedups)" if speedups is not None else "Python"


def new_tracker(emit: Callable[[tuple[Any, ...]], None]) -> Any:
    """A step tracker: the C one when available, else ``steps.StepTracker``."""
    return (speedups.StepTracker if speedups is not None else steps.StepTracker)(emit)


def is_fast(tracker: Any) -> bool:
    """Whether the C wrappers can drive this tracker."""
    return speedups is not None and isinstance(tracker, speedups.StepTracker)
