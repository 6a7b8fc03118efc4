"""torch.compile in use, seen through two of torch's public observation points; nothing of
torch's is replaced (``torch.compile``, ``Module.compile`` and ``OptimizedModule.__call__``
stay torch's own objects, as dynamo, TorchScript, ``inspect`` and pickling see them).

- A ``torch.compile(model)`` wrapper is made: a global module registration hook
  (``register_module_module_registration_hook``). ``OptimizedModule.__init__`` assigns the
  model as its ``_orig_mod`` submodule, so the hook sees the wrapper when
  ``torch.compile(model)`` returns it (or when one is unpickled), before its first call.
  Registration hooks are none of the "global hooks" that ``OptimizedModule.__call__``
  warns about (``_has_any_global_hook``: forward and backward hooks only), and dynamo
  never reads them (nothing in ``torch._dynamo`` refers to them: a submodule assigned
  inside a compiled region is dynamo's side effect, replayed by torch after the graph).
  The hook runs at each submodule assignment of the job: it compares the name with one
  string, and returns None (the submodule is never replaced).
- dynamo starts compiling a frame: dynamo's start callback
  (``callback_handler.register_start_callback``), which ``convert_frame.compile_inner``
  runs before it snapshots the function-mode stack and traces anything. That covers
  what makes no wrapper: a compiled function or method, ``Module.compile()``, a model's
  wrapper's first compile. ``torch._dynamo.reset()`` clears dynamo's callbacks: users of
  this watch call :meth:`CompileWatch.ensure` where they need it (a list look-up), which
  registers it again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from perftop.hook.importwatch import after_import
from perftop.hook.state import HookState

WRAPPER_ATTR = "_orig_mod"  # OptimizedModule's submodule: the compiled model


class CompileWatch:
    def __init__(self, state: HookState) -> None:
        self.state = state
        self.on_wrapper: list[Callable[[], None]] = []  # a torch.compile(model) wrapper made
        self.on_start: list[Callable[[], None]] = []  # dynamo starts compiling a frame
        self.wrappers = 0  # torch.compile(model) wrappers made
        self.handler: Any = None  # dynamo's callback handler, once it is imported
        self.cbs: list[Any] | None = None  # its start callbacks
        self.cb = self.started  # one bound method: found in dynamo's list by identity
        self.at = 0  # where it was last found there
        self.blind = False  # dynamo imported but its callback could not be registered

    def listen(self, wrapper: Callable[[], None], start: Callable[[], None]) -> None:
        """``wrapper`` when a torch.compile(model) wrapper is made, ``start`` when dynamo
        starts compiling a frame (at once where that cannot be seen)."""
        self.on_wrapper.append(wrapper)
        self.on_start.append(start)
        if self.blind:
            start()

    def registered(self, module: Any, name: str, sub: Any) -> None:
        """torch's module registration hook: a submodule is assigned. Returns None."""
        if name == WRAPPER_ATTR:
            try:
                ef = sys.modules.get("torch._dynamo.eval_frame")
                if ef is not None and isinstance(module, ef.OptimizedModule):
                    self.wrappers += 1
                    self._tell(self.on_wrapper, "torch.compile(model)")
            except Exception:
                self.state.internal_error("torch.compile(model)")

    def started(self, args: Any = None) -> None:
        """dynamo's start callback: it starts compiling a frame, before any tracing."""
        self._tell(self.on_start, "dynamo start callback")

    def _tell(self, listeners: list[Callable[[], None]], what: str) -> None:
        for fn in listeners:
            try:
                fn()
            except Exception:
                self.state.internal_error(what)

    def ensure(self) -> None:
        """dynamo's start callback registered (again, after ``torch._dynamo.reset()``).
        Called once or twice a step: one look at the place it was last found."""
        try:
            if self.cbs[self.at] is self.cb:  # type: ignore[index]
                return
        except (IndexError, TypeError):  # cleared (or dynamo not imported: None)
            if self.cbs is None:
                return
        self._find()

    def _find(self) -> None:
        cbs = self.cbs
        try:
            if cbs is not None and self.cb not in cbs:
                self.handler.register_start_callback(self.cb)
            self.at = cbs.index(self.cb) if cbs is not None else 0
        except Exception:
            self.cbs = None  # no more looks
            self.state.internal_error("dynamo callbacks")

    def dynamo(self) -> None:
        try:
            import torch._dynamo.callback as cb

            handler = cb.callback_handler
            handler.register_start_callback(self.cb)
            self.handler, self.cbs = handler, handler.start_callbacks
            self.at = self.cbs.index(self.cb)
            self.state.undo.append(self._unregister)
        except Exception:
            self.cbs = None
            self.blind = True
            self.state.internal_error("dynamo callbacks")
            self._tell(self.on_start, "dynamo callbacks")  # no way to tell: as if it did

    def _unregister(self) -> None:
        cbs, self.cbs = self.cbs, None
        if cbs is not None and self.cb in cbs:
            cbs.remove(self.cb)


def install(state: HookState) -> CompileWatch:
    """The watch, its registration hook in place; dynamo's callback once it is imported."""
    from torch.nn.modules.module import register_module_module_registration_hook

    watch = CompileWatch(state)
    state.handles.append(register_module_module_registration_hook(watch.registered))
    after_import("torch._dynamo", lambda _: watch.dynamo())
    return watch
