"""A package installed in a ``site-packages`` folder (real files, imported for real): how
library code looks to perftop's frame classification."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

SOURCE = """
def fit(op, *args):
    return inner(op, *args)


def inner(op, *args):
    return op(*args)  # the library's syncing line
"""
LINE = 7  # of the syncing line above


def installed(root: Path, name: str = "fakelib") -> Iterator[ModuleType]:
    """Yields ``<name>.trainer`` from ``root/lib/site-packages``; removed afterwards."""
    site = root / "lib" / "site-packages"
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("")
    (site / name / "trainer.py").write_text(SOURCE)
    sys.path.insert(0, str(site))
    try:
        yield importlib.import_module(f"{name}.trainer")
    finally:
        sys.path.remove(str(site))
        sys.modules.pop(f"{name}.trainer", None)
        sys.modules.pop(name, None)
