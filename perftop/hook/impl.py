"""Which build of the step tracker runs: ``perftop.hook._steps_fast``, steps.py compiled by
Cython (``setup.py``), when it is built and imports, else the plain module ``steps.py``.
Both are the same source; the compiled one keeps a training step free of Python frames
of perftop's.

``PERFTOP_PURE=1`` forces the plain module. A missing or unloadable extension (not
compiled, or the hook loaded by path into another Python version) falls back silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from perftop.hook import steps

FAST = "perftop.hook._steps_fast"


def _load() -> ModuleType:
    if os.environ.get("PERFTOP_PURE", "").strip() not in ("", "0"):
        return steps
    try:
        from perftop.hook import _steps_fast  # type: ignore[attr-defined]  # built by Cython

        return _steps_fast
    except Exception:  # not built, built for another Python, broken: the plain module runs
        return steps


module = _load()
compiled = module is not steps
NAME = f"compiled ({FAST}, Cython)" if compiled else "Python (perftop.hook.steps)"


def new_tracker(emit: Callable[[tuple[Any, ...]], None]) -> Any:
    """A step tracker of the build in use."""
    return module.StepTracker(emit)
