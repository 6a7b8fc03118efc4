"""Timing ``optimizer.step()``: perftop's wrapper around each optimizer class's step, or
torch's global optimizer hooks where dynamo may trace the step.

torch wraps each optimizer class's ``step`` once, at the first optimizer of the class
(``Optimizer._patch_step_function``), in a Python function that loops over its global and
per-optimizer hook tables before and after the step. Hooks in those tables cost every
step the loops' bodies and the tables' iteration: code that is cold again after each
step's torch work, ~3,800 cycles a step on a tight CPU step under callgrind, more than
perftop's own functions (``docs/benchmarks.md``). So perftop wraps the class's step as
torch left it (``StepTracker.wrap_step``: in the compiled build a C object that calls the
hooks' two functions directly around it), and torch's loops find their tables empty. A
call with more than the optimizer (a closure: LBFGS, Lightning) takes the hooks' way in
Python, which times the closure apart.

dynamo traces ``opt.step()`` inside a compiled function, and a C object in its way would
break the graph (or be called unbound). So as soon as the job asks for a compile
(``torch._dynamo.optimize``, which ``torch.compile`` calls, before anything is traced; or
dynamo's start callback, for other ways in, which ``torch._dynamo.reset()`` clears), the
classes get torch's wrappers back and the global hooks take over for good, which dynamo
skips as no-ops (``torch_patch._dynamo_ignores``), as before this module. The import of
dynamo says nothing: torch imports it at the first optimizer (``add_param_group``). A hook
that arrives after the job's first optimizer (injected into a running job) uses torch's
hooks from the start: that optimizer's step may be compiled already. An LR
scheduler made before the switch keeps perftop's step in its own wrapper on the optimizer
(which dynamo never traces: torch marks that file skipped); there both run, the hooks'
pair inside times the step and the outer end finds it closed (one step, as a subclass's
step calling its base class's is).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from perftop.hook.importwatch import after_import
from perftop.hook.state import HookState


class OptimizerSteps:
    def __init__(self, state: HookState, optim_mod: Any) -> None:
        self.state = state
        self.tracker = state.tracker
        self.mod = optim_mod
        self.wrapped: list[tuple[Any, Any, Any]] = []  # class, torch's step, ours
        self.hooked = False  # the global hooks in place of wrappers: for good

    def install(self) -> None:
        opt_cls = self.mod.Optimizer
        orig = opt_cls.__dict__["_patch_step_function"]
        steps = self

        @functools.wraps(orig)
        def _patch_step_function(opt: Any) -> None:
            orig(opt)
            if not steps.hooked:
                try:
                    steps.adopt(type(opt))
                except Exception:
                    steps.state.internal_error("optimizer step")

        opt_cls._patch_step_function = _patch_step_function
        self.state.undo.append(lambda: setattr(opt_cls, "_patch_step_function", orig))
        self.state.undo.append(self.unwrap)
        if _stepped_before(opt_cls):
            # Optimizers made before perftop (a hook injected into a running job): their
            # steps, maybe compiled already, are timed by torch's hooks, as dynamo sees them.
            self.use_hooks()
            return
        if "torch._dynamo" in sys.modules:
            self.watch_compiles()
        else:
            after_import("torch._dynamo", lambda _: self.watch_compiles())

    def watch_compiles(self) -> None:
        try:
            import torch._dynamo as dynamo
            import torch._dynamo.callback as cb

            orig = dynamo.optimize
            steps = self

            @functools.wraps(orig)
            def optimize(*args: Any, **kwargs: Any) -> Any:
                steps.use_hooks()
                return orig(*args, **kwargs)

            dynamo.optimize = optimize
            self.state.undo.append(lambda: setattr(dynamo, "optimize", orig))
            cb.callback_handler.register_start_callback(self.compile_started)
            self.state.undo.append(
                lambda: cb.callback_handler.remove_start_callback(self.compile_started)
            )
        except Exception:  # no way to tell when dynamo traces: torch's hooks from now on
            self.use_hooks()

    def compile_started(self, args: Any = None) -> None:
        self.use_hooks()

    def adopt(self, cls: Any) -> None:
        """The class's own step, as torch wrapped it, gets perftop's around it."""
        step = cls.__dict__.get("step")
        if step is None or not getattr(step, "hooked", False):
            return  # inherited (its class's is adopted), or not torch's wrapper
        if any(ours is step for _, _, ours in self.wrapped):
            return
        ours = functools.update_wrapper(self.tracker.wrap_step(step, self._slow(step)), step)
        cls.step = ours
        self.wrapped.append((cls, step, ours))

    def _slow(self, step: Any) -> Any:
        """A step with a closure (or other arguments): the global hooks' way, the pre-hook
        may hand a timed closure on in the arguments."""
        pre, post = self.tracker.opt_pre_hook, self.tracker.opt_post_hook

        @functools.wraps(step)
        def call(*args: Any, **kwargs: Any) -> Any:
            opt = args[0] if args else None
            new = pre(opt, args, kwargs)
            if new is not None:
                args, kwargs = new
            res = step(*args, **kwargs)
            post(opt, args, kwargs)
            return res

        return call

    def unwrap(self) -> None:
        for cls, step, ours in self.wrapped:
            if cls.__dict__.get("step") is ours:
                cls.step = step
        self.wrapped.clear()

    def use_hooks(self) -> None:
        """torch's global optimizer hooks from now on (dynamo traces them as no-ops)."""
        if self.hooked:
            return
        self.hooked = True
        try:  # called from the job's torch.compile (or dynamo): nothing may reach it
            self.unwrap()
            tr, mod = self.tracker, self.mod
            self.state.handles.append(mod.register_optimizer_step_pre_hook(tr.opt_pre_hook))
            self.state.handles.append(mod.register_optimizer_step_post_hook(tr.opt_post_hook))
        except Exception:
            self.state.internal_error("optimizer hooks")


def _stepped_before(base: type) -> bool:
    """Whether torch has wrapped the step of some optimizer class already."""
    todo: list[type] = [base]
    seen: set[type] = set()
    while todo:
        subs: list[type] = todo.pop().__subclasses__()
        for sub in subs:
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
                if getattr(sub.__dict__.get("step"), "hooked", False):
                    return True
    return False
