"""``after_import`` (perftop/hook/importwatch.py) where the module asked for is already in
``sys.modules`` but still executing: the import that is running it imported torch first
(``from transformers import Trainer`` in a script with no ``import torch`` before it), so
torch's arming asks for that module half-way through it. The callback comes once the
module has run, its classes defined; where its import fails, at the job's next try. Real
imports of real files, in this process; the end-to-end case is test_hf_checkpoints.py."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from perftop.hook.importwatch import after_import

OUTER = """import {inner}
{fail}
class Late:
    pass
"""


@pytest.fixture
def pkg_dir(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    before = set(sys.modules)
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in set(sys.modules) - before:
            del sys.modules[name]


def _modules(where: Path, tag: str, fail: bool = False) -> tuple[str, str]:
    """``outer_TAG`` imports ``inner_TAG`` first, then defines ``Late`` (after raising,
    where ``fail``)."""
    outer, inner = f"outer_{tag}", f"inner_{tag}"
    (where / f"{inner}.py").write_text("X = 1\n")
    fail_line = "raise RuntimeError('failed half-way')" if fail else ""
    (where / f"{outer}.py").write_text(OUTER.format(inner=inner, fail=fail_line))
    importlib.invalidate_caches()
    return outer, inner


def _arm(inner: str, outer: str, got: list[tuple[ModuleType, bool]]) -> None:
    """As torch's arming does: once ``inner`` has run, ask for ``outer``."""

    def armed(_: ModuleType) -> None:
        after_import(outer, lambda m: got.append((m, hasattr(m, "Late"))))

    after_import(inner, armed)


def test_a_module_still_executing_is_called_back_once_it_has_run(pkg_dir: Path) -> None:
    outer, inner = _modules(pkg_dir, "run")
    got: list[tuple[ModuleType, bool]] = []
    _arm(inner, outer, got)
    mod = importlib.import_module(outer)
    assert got == [(mod, True)]  # once, with its classes (before the fix: Late missing)
    # the spec is the import system's own again, and says the module has run
    assert type(mod.__spec__) is importlib.machinery.ModuleSpec
    assert mod.__spec__._initializing is False  # type: ignore[attr-defined]
    importlib.reload(mod)
    assert len(got) == 1


def test_two_asks_for_one_executing_module_are_each_called_back(pkg_dir: Path) -> None:
    """Two asks for one module half-way through it (saves.py asks for accelerate's
    ``accelerate.accelerator`` twice, its ``save_state`` and ``save_model``): each is
    called back once, in the order asked (before the fix: the first was lost)."""
    outer, inner = _modules(pkg_dir, "twice")
    got: list[tuple[str, bool]] = []

    def armed(_: ModuleType) -> None:
        for tag in ("first", "second"):
            after_import(outer, lambda m, tag=tag: got.append((tag, hasattr(m, "Late"))))

    after_import(inner, armed)
    mod = importlib.import_module(outer)
    assert got == [("first", True), ("second", True)]
    assert type(mod.__spec__) is importlib.machinery.ModuleSpec
    importlib.reload(mod)
    assert len(got) == 2


def test_two_asks_for_a_module_that_failed_half_way_each_come_at_the_next_try(
    pkg_dir: Path,
) -> None:
    outer, inner = _modules(pkg_dir, "twicefail", fail=True)
    got: list[str] = []

    def armed(_: ModuleType) -> None:
        for tag in ("first", "second"):
            after_import(outer, lambda m, tag=tag: got.append(tag))

    after_import(inner, armed)
    with pytest.raises(RuntimeError, match="failed half-way"):
        importlib.import_module(outer)
    assert got == []
    _modules(pkg_dir, "twicefail")
    mod = importlib.import_module(outer)
    assert sorted(got) == ["first", "second"]
    assert type(mod.__spec__) is importlib.machinery.ModuleSpec


def test_a_module_that_failed_half_way_is_called_back_at_the_next_try(pkg_dir: Path) -> None:
    outer, inner = _modules(pkg_dir, "fail", fail=True)
    got: list[tuple[ModuleType, bool]] = []
    _arm(inner, outer, got)
    with pytest.raises(RuntimeError, match="failed half-way"):
        importlib.import_module(outer)
    assert got == [] and outer not in sys.modules
    _modules(pkg_dir, "fail")  # the job mends it and imports it again
    mod = importlib.import_module(outer)
    assert got == [(mod, True)]
    assert type(mod.__spec__) is importlib.machinery.ModuleSpec


def test_a_module_already_run_is_called_back_at_once(pkg_dir: Path) -> None:
    outer, _ = _modules(pkg_dir, "done")
    mod = importlib.import_module(outer)
    got: list[ModuleType] = []
    after_import(outer, got.append)
    assert got == [mod]


def test_a_callback_that_raises_never_reaches_the_import(pkg_dir: Path) -> None:
    outer, inner = _modules(pkg_dir, "raises")

    def armed(_: ModuleType) -> None:
        after_import(outer, lambda m: 1 / 0)

    after_import(inner, armed)
    mod = importlib.import_module(outer)
    assert hasattr(mod, "Late") and type(mod.__spec__) is importlib.machinery.ModuleSpec
