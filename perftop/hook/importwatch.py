"""Run a callback right after a module is first imported, without importing it ourselves.

A finder at the front of ``sys.meta_path`` lets the real finders locate the module, then
wraps its loader so the callback runs once the module has fully executed. This keeps
processes that never import torch (a torchrun launcher, a shell's helpers) untouched.

Libraries ask whether torch exists before importing it (``importlib.util.find_spec``
in transformers, datasets, accelerate): a look-up is not an import, so the watcher stays
on ``sys.meta_path`` through any number of them and leaves only once the module has really
executed (it stays too when that import fails, for the job's next try). A module asked for
while it is itself executing (its import imported torch first, and torch's arming asks
for it) is called back once it has run, not half-way (``_when_executed``).

Every Python process of a job loads this file at start-up (the bootstrap loads it by path,
as ``_perftop_importwatch``): it imports nothing that start-up has not loaded already.
"""

from __future__ import annotations

import _thread
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # what start-up has not loaded costs every process of the job
    from collections.abc import Callable
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any


class _Loader:
    """The real loader, and a call back once it has executed the module."""

    def __init__(self, inner: Any, watcher: _Watcher) -> None:
        self.inner = inner
        self.watcher = watcher

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
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


class _Watcher:
    """A finder first on ``sys.meta_path`` that finds nothing itself."""

    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callback = callback
        self.done = False
        self._busy: set[int] = set()  # threads in our own look-up: it must not find us

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        me = _thread.get_ident()
        if fullname != self.name or self.done or me in self._busy:
            return None
        self._busy.add(me)
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
            self._busy.discard(me)

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
    module = sys.modules.get(name)
    if module is None:
        sys.meta_path.insert(0, _Watcher(name, callback))
    elif not _when_executed(name, module, _Watcher(name, callback)):
        callback(module)


def _when_executed(name: str, module: ModuleType, watch: _Watcher) -> bool:
    """Call back once ``module``, in ``sys.modules`` but still executing, has run; False
    where it is not executing. That is the module whose import imported torch first
    (``from transformers import Trainer`` in a script that imports torch no earlier):
    called back now, its classes are not yet defined. The import system sets its spec's
    ``_initializing`` back to False once it has run the module (or failed to); a subclass
    of the spec's class sees that assignment, puts the spec's own class back and calls
    back, or, where the import failed, watches for the job's next try."""
    spec = getattr(module, "__spec__", None)
    try:
        if spec is None or spec.__dict__.get("_initializing") is not True:
            return False
        base = type(spec)

        def get(self: Any) -> Any:
            return self.__dict__.get("_initializing", False)

        def ran(self: Any, value: Any) -> None:
            self.__dict__["_initializing"] = value
            if value is not False:
                return
            try:
                self.__class__ = base
                # where ``base`` is an earlier ask's own class (two asks for one executing
                # module), its setter hears the end too, first: each is called back
                self._initializing = value
                if sys.modules.get(name) is module:
                    watch.imported(module)  # once; the callback's errors stay here
                else:
                    sys.meta_path.insert(0, watch)
            except Exception:
                pass

        ns = {"__slots__": (), "__module__": base.__module__, "__qualname__": base.__qualname__}
        spec.__class__ = type(base.__name__, (base,), {**ns, "_initializing": property(get, ran)})
        return True
    except Exception:
        return False
