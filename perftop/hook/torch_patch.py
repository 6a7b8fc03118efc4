"""Wiring the step tracker into torch once torch is imported: optimizer steps, the
autograd engine's entry (backward, autograd.grad), the DataLoader iterators and the
writers of ``torch.save``. What torch calls
every step comes from the tracker (``wrap_backward``, ``wrap_next`` or the optimizer
hooks: ``optim_steps.py``): in the compiled build C pass-throughs and hooks that call its compiled
functions; each calls the original first and swallows its own errors: a perftop bug must
never surface in user code."""

from __future__ import annotations

import functools
import itertools
import sys
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perftop.events import LoaderInfo
from perftop.hook import lib_optims, optim_steps, saves
from perftop.hook.state import HookState

if TYPE_CHECKING:
    from perftop.hook.compile_watch import CompileWatch

_perf = time.perf_counter


def patch_torch(state: HookState) -> None:
    import torch
    import torch.optim.optimizer as optim_mod
    import torch.utils.data.dataloader as dl

    tracker = state.tracker

    # -- torch.compile in use, seen through torch's registration hook and dynamo's start
    # callback (nothing replaced): what dynamo must not trace steps aside before it does
    from perftop.hook import compile_watch

    state.compiles = compile_watch.install(state)

    # -- optimizer: torch's global step hooks; each class's step stays torch's ----------
    optim_steps.install(state, optim_mod, state.compiles)
    # ... and libraries' own optimizers, not torch's: their classes' step (lib_optims.py)
    lib_optims.install(state)

    # -- backward and autograd.grad (functional training's backward; torch.func's too): both
    # run the engine through torch.autograd's private ``_engine_run_backward``, wrapped in
    # torch.autograd's namespace only. torch.autograd.backward and .grad stay torch's own
    # objects, as TorchScript, dynamo, inspect and pickling see them. ------------------------
    _wrap_engine(state, torch.autograd, tracker)

    # -- no_grad regions are never patched (TorchScript compiles no_grad's own methods): a
    # pass begins at a forward with grad off, seen by the one-shot forward pre-hook armed
    # at each step end (first_forward.py) -------------------------------------------------
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
    _first_forward(state, state.compiles)

    # -- which loader an iterator iterates, and its settings: read off the iterator at its
    # first batch (its classes' __init__ stay torch's) --------------------------------------
    tracker.on_iter = _Iterators(state).seen
    state.undo.append(lambda: setattr(tracker, "on_iter", None))

    # -- checkpoints: torch.save's writers, safetensors' save_file, the HF Trainer's whole
    # checkpoint (saves.py) ------------------------------------------------------------
    saves.install(state)


def _first_forward(state: HookState, watch: CompileWatch) -> None:
    """Arms the tracker's feeder timing once torch is patched; off once compiles are seen."""
    from torch.nn.modules import module
    from torch.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
    )

    from perftop.hook.first_forward import FirstForward
    from perftop.hook.pass_meter import PassMeter
    from perftop.hook.pass_narrow import Narrow
    from perftop.hook.prehook_slot import PreHookSlot

    ff = FirstForward(state, PreHookSlot(module, register_module_forward_pre_hook), watch)
    tr = state.tracker
    ff.meter = PassMeter(
        register_module_forward_hook,
        lambda: tr.thread,
        state.internal_error,
    )
    tr.on_arm = ff.arm
    tr.watching = ff.watching
    tr.on_closure = ff.closure_began
    ff.meter.on_env = ff.env_seen
    table = getattr(module, "_global_forward_hooks", None)
    if isinstance(table, dict) and isinstance(ff.slot.table_of(), dict):
        ff.meter.table = table
        ff.narrow = Narrow(ff.lift, ff.relay, ff.meter.post, lambda: tr.thread,
                           state.internal_error)  # fmt: skip
    state.undo.append(ff.disarm)
    state.undo.append(ff.meter.stop)
    watch.listen(ff.wrapper_made, ff.compile_started)


def _wrap_engine(state: HookState, autograd: Any, tracker: Any) -> None:
    """``autograd._engine_run_backward``: backward() passes ``accumulate_grad=True``,
    autograd.grad() ``False``; each timed by its own pass-through (outermost call only)."""
    orig = autograd.__dict__.get("_engine_run_backward")
    if not callable(orig):
        state.sender.note("info", "backward() is not timed: this torch has no engine entry")
        return
    bwd, grad = tracker.wrap_backward(orig), tracker.wrap_grad(orig)

    def _engine_run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("accumulate_grad", True):
            return bwd(t_outputs, *args, **kwargs)
        return grad(t_outputs, *args, **kwargs)

    autograd._engine_run_backward = functools.update_wrapper(_engine_run_backward, orig)
    state.undo.append(lambda: setattr(autograd, "_engine_run_backward", orig))


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


class _Iterators:
    """DataLoader iterators, met at their first batch (the tracker asks once per iterator
    it switches to): each loader numbered, by its index sampler (the batch sampler or
    sampler every loader makes for itself at its construction, which its iterators
    share; the iterator keeps no reference to its loader), and its settings sent once per
    iterator: an epoch's start where the workers start again (no ``persistent_workers``),
    once where they persist (the loader keeps its iterator)."""

    def __init__(self, state: HookState) -> None:
        self.state = state
        self.loaders: Any = weakref.WeakKeyDictionary()  # index sampler -> its number
        self.iters: Any = weakref.WeakKeyDictionary()  # iterator -> its loader's number
        self.counter = itertools.count()

    def seen(self, it: Any) -> Any:
        try:
            number = self.iters.get(it)
            if number is None:
                key = getattr(it, "_index_sampler", None)
                number = _number(self.loaders, it if key is None else key, self.counter)
                self.iters[it] = number
                sender = self.state.sender
                sender.put(_loader_info(sender.pid, sender.epoch_offset, it, number))
            return number
        except Exception:
            self.state.internal_error("DataLoader iterator")
            return None


def _loader_info(pid: int, offset: float, it: Any, number: int) -> LoaderInfo:
    """A loader's settings as its iterator holds them (torch's ``_BaseDataLoaderIter``):
    the batch size is its batch sampler's (a loader made with ``batch_size``, or one given
    its own batch sampler that has one), ``pin_memory`` whether batches are pinned (torch
    pins only where an accelerator is available). Its time is the steps' clock
    (``perf_counter`` plus the sender's ``offset``): a start is placed among the steps to
    the millisecond (``hints/restarts.py``: the step whose wait holds it ends about a
    forward and a backward later), where a second clock could put it on the wrong side."""
    n = int(getattr(it, "_num_workers", 0) or 0)
    size = getattr(it._index_sampler, "batch_size", None) if it._auto_collation else None
    workers = getattr(it, "_workers", ()) or ()
    return LoaderInfo(
        t=time.perf_counter() + offset,
        pid=pid,
        loader_id=number,
        num_workers=n,
        batch_size=size if isinstance(size, int) else None,
        pin_memory=bool(getattr(it, "_pin_memory", False)),
        prefetch_factor=getattr(it, "_prefetch_factor", None) if n else None,
        persistent_workers=bool(getattr(it, "_persistent_workers", False)),
        workers=tuple((i, int(w.pid)) for i, w in enumerate(workers) if w.pid is not None),
        dataset=type(it._dataset).__name__,
        start_method=_start_method(workers),
        grad=bool(sys.modules["torch"].is_grad_enabled()),
    )
