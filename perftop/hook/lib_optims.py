"""Optimizers of libraries that are not ``torch.optim``'s, timed as torch's global
optimizer hooks time a ``torch.optim`` step (optim_steps.py).

fastai's own ``Optimizer`` (its ``Adam``, ``SGD``, ``RAdam``, ``Lamb``: a ``Learner``'s
default) is no ``torch.optim.Optimizer``: torch's hooks never run for it, so steps were
counted by ``backward()``, and under gradient accumulation (fastai's
``GradientAccumulation``) each micro-batch read as a step, with no optimizer phase. Its
class is fastai's, not torch's (nothing TorchScript, dynamo or ``inspect`` sees of
torch), so its ``step`` is wrapped on the class once ``fastai.optimizer`` is imported,
the tracker's pre- and post-hooks called around fastai's own, as torch calls them around
a ``torch.optim`` step (never after one that raised). fastai's ``OptimWrapper`` around a
``torch.optim`` optimizer hands its step to that one, which torch's hooks time: its class
is left alone. Undone with the hook.
"""

from __future__ import annotations

import functools
from typing import Any

from perftop.hook.importwatch import after_import
from perftop.hook.state import HookState

# module -> the optimizer classes whose own ``step`` is wrapped there
STEPS = {"fastai.optimizer": ("Optimizer",)}


def install(state: HookState) -> None:
    for module, classes in STEPS.items():
        after_import(module, functools.partial(_wrap_steps, state, classes))


def _wrap_steps(state: HookState, classes: tuple[str, ...], module: Any) -> None:
    for name in classes:
        cls = getattr(module, name, None)
        if not isinstance(cls, type):
            continue
        try:
            state.wrap(cls, "step", _timed)
        except Exception:
            state.internal_error(f"{module.__name__}.{name}.step")


def _timed(state: HookState, orig: Any) -> Any:
    tr = state.tracker

    @functools.wraps(orig)
    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        got = tr.opt_pre_hook(self, args, kwargs)  # never raises (steps._hook)
        if got is not None:
            args, kwargs = got
        out = orig(self, *args, **kwargs)
        tr.opt_post_hook(self, args, kwargs)
        return out

    return step
