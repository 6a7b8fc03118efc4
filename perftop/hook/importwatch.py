"""Run a callback right after a module is first imported, without importing it ourselves.

A finder at the front of ``sys.meta_path`` lets the real finders locate the module, then
wraps its loader so the callback runs once the module has fully executed. This keeps
processes that never import torch (a torchrun launcher, a shell's helpers) untouched.

Libraries ask whether torch exists before importing it (``importlib.util.find_spec``
in transformers, datasets, accelerate): a look-up is not an import, so the watcher stays
on ``sys.meta_path`` through any number of them and leaves only once the module has really
executed (it stays too when that import fails, for the job's next try).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, watcher: _Watcher) -> None:
        self.inner = inner
        self.watcher = watcher

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        try:  # the module keeps the loader it would have had without perftop
            module.__loader__ = self.inner
            if module.__spec__ is not None and module.__spec__.loader is self:
                module.__spec__.loader = self.inner
        except Exception:
            pass
        self.watcher.imported(module)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self.inner, name)


class _Watcher(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callback = callback
        self.done = False
        self._busy = threading.local()  # our own look-up below must not find ourselves

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name or self.done or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            for finder in list(sys.meta_path):
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = _Loader(spec.loader, self)
                    return spec
            return None
        finally:
            self._busy.on = False

    def imported(self, module: ModuleType) -> None:
        """The module has executed (a real import, not a look-up): call back once, leave."""
        if self.done:
            return
        self.done = True
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        try:
            self.callback(module)
        except Exception:
            pass


def after_import(name: str, callback: Callable[[ModuleType], None]) -> None:
    if name in sys.modules:
        callback(sys.modules[name])
    else:
        sys.meta_path.insert(0, _Watcher(name, callback))
