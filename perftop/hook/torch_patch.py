"""Wiring the step tracker into torch once torch is imported: optimizer steps,
``torch.autograd.backward``, the DataLoader iterators and ``torch.save``. What torch calls
every step comes from the tracker (``wrap_backward``, ``wrap_next``, ``wrap_step`` or the
optimizer hooks: ``optim_steps.py``): in the compiled build C pass-throughs and hooks that call its compiled
functions; each calls the original first and swallows its own errors: a perftop bug must
never surface in user code."""

from __future__ import annotations

import functools
import itertools
import sys
import time
import weakref
from pathlib import Path
from typing import Any

from perftop.events import LoaderInfo
from perftop.hook.optim_steps import OptimizerSteps
from perftop.hook.state import HookState
from perftop.hook.steps import LOADER_KEY

_perf = time.perf_counter


def patch_torch(state: HookState) -> None:
    import torch
    import torch.optim.optimizer as optim_mod
    import torch.utils.data.dataloader as dl

    tracker = state.tracker

    # -- optimizer: around each class's step, or torch's global hooks under dynamo ---------
    OptimizerSteps(state, optim_mod).install()

    # -- backward: Tensor.backward calls torch.autograd.backward -------------------------
    orig_backward = torch.autograd.backward
    torch.autograd.backward = functools.update_wrapper(
        tracker.wrap_backward(orig_backward), orig_backward
    )
    state.undo.append(lambda: setattr(torch.autograd, "backward", orig_backward))

    # -- autograd.grad: functional training's backward (torch.func calls it too) ---------
    orig_grad = torch.autograd.grad
    torch.autograd.grad = functools.update_wrapper(tracker.wrap_grad(orig_grad), orig_grad)
    state.undo.append(lambda: setattr(torch.autograd, "grad", orig_grad))

    # -- no_grad regions: an evaluation or sampling pass between steps (gaps.py) ---------
    ng = torch.autograd.grad_mode.no_grad
    for name, entered in (("__enter__", True), ("__exit__", False)):
        orig = ng.__dict__[name]
        setattr(ng, name, functools.update_wrapper(tracker.wrap_no_grad(orig, entered), orig))
        state.undo.append(functools.partial(setattr, ng, name, orig))

    # -- dynamo: the optimizer hooks are no-ops in a traced graph (a compiled opt.step()
    # must compile as it does without perftop: no graph break on perftop's objects) ------
    from perftop.hook.importwatch import after_import

    after_import("torch._dynamo", lambda _: _dynamo_ignores(tracker))

    # -- DataLoader: time blocked in __next__, which loader, whether grad is on -----------
    base = dl._BaseDataLoaderIter
    orig_next = base.__next__
    base.__next__ = functools.update_wrapper(  # type: ignore[method-assign]
        tracker.wrap_next(orig_next, torch.is_grad_enabled), orig_next
    )
    state.undo.append(lambda: setattr(base, "__next__", orig_next))
    _fast_grad(torch, tracker)

    # -- feeders (a queue, a generator): the wait before each step's first forward -------
    from perftop.hook import first_forward

    first_forward.install(state)

    loaders: Any = weakref.WeakKeyDictionary()  # loader -> its number; never an id()
    counter = itertools.count()
    for cls in (dl._SingleProcessDataLoaderIter, dl._MultiProcessingDataLoaderIter):
        _wrap_init(state, cls, loaders, counter)

    # -- torch.save: a checkpoint is time outside training steps --------------------------
    orig_save = torch.save

    @functools.wraps(orig_save)
    def save(*args: Any, **kwargs: Any) -> Any:
        t0 = _perf()
        try:
            return orig_save(*args, **kwargs)
        finally:
            try:
                tracker.saved(t0, _perf())
            except Exception:
                state.internal_error("torch.save")

    torch.save = save
    state.undo.append(lambda: setattr(torch, "save", orig_save))


def _dynamo_ignores(tracker: Any) -> None:
    """Dynamo skips the hooks (they return None) instead of breaking the graph at them."""
    import torch._dynamo.config as config

    ignored = config.ignore_logging_functions
    ignored.add(tracker.opt_pre_hook)
    ignored.add(tracker.opt_post_hook)


def libc10(torch: Any) -> Path:
    """Where torch keeps its c10 library (loaded with torch._C)."""
    name = "libc10.dylib" if sys.platform == "darwin" else "libc10.so"
    return Path(torch.__file__).parent / "lib" / name


def _fast_grad(torch: Any, tracker: Any) -> None:
    """Grad mode read in C per batch instead of a call of torch.is_grad_enabled, where
    the compiled tracker finds c10's function and it agrees with torch in every mode."""
    lib = libc10(torch)
    if not lib.exists() or not tracker.fast_grad(str(lib)):
        return
    try:
        seen = [tracker.grad() == torch.is_grad_enabled()]
        for mode in (torch.no_grad, torch.enable_grad, torch.inference_mode):
            with mode():
                seen.append(tracker.grad() == torch.is_grad_enabled())
        agree = all(seen)
    except Exception:
        agree = False
    if not agree:
        tracker.slow_grad()


def _number(loaders: Any, loader: Any, counter: Any) -> int:
    try:
        n = loaders.get(loader)
        if n is None:
            n = loaders[loader] = next(counter)
        return n
    except TypeError:  # not weak-referenceable: a number of its own each time
        return next(counter)


def _start_method(workers: Any) -> str:
    """The workers' start method, read off their process class (``SpawnProcess`` says
    ``spawn``); a plain ``multiprocessing.Process`` (the DataLoader's default) started
    with the default context, which its start has fixed by now (``allow_none``: asking
    never fixes it for the job)."""
    w = next(iter(workers or ()), None)
    if w is None:
        return ""
    method = getattr(w, "_start_method", None)
    if method is None:
        import multiprocessing

        method = multiprocessing.get_start_method(allow_none=True)
    return method if isinstance(method, str) else ""


def _wrap_init(state: HookState, cls: type, loaders: Any, counter: Any) -> None:
    orig_init = cls.__init__  # type: ignore[misc]  # the class's own, restored on undo

    @functools.wraps(orig_init)
    def __init__(self: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, loader, *args, **kwargs)
        try:
            number = _number(loaders, loader, counter)
            setattr(self, LOADER_KEY, number)
            workers = tuple(
                (i, int(w.pid))
                for i, w in enumerate(getattr(self, "_workers", ()) or ())
                if w.pid is not None
            )
            state.sender.put(
                LoaderInfo(
                    t=time.time(),
                    pid=state.sender.pid,
                    loader_id=number,
                    num_workers=int(loader.num_workers),
                    batch_size=loader.batch_size,
                    pin_memory=bool(loader.pin_memory),
                    prefetch_factor=loader.prefetch_factor if loader.num_workers else None,
                    persistent_workers=bool(loader.persistent_workers),
                    workers=workers,
                    dataset=type(loader.dataset).__name__,
                    start_method=_start_method(getattr(self, "_workers", ())),
                )
            )
        except Exception:
            state.internal_error("DataLoader iterator")

    cls.__init__ = __init__  # type: ignore[misc]
    state.undo.append(lambda: setattr(cls, "__init__", orig_init))
