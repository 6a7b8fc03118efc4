"""Wiring the step tracker into torch once torch is imported: global optimizer hooks,
``torch.autograd.backward``, and the DataLoader iterators. Each wrapper calls the original
first-class and swallows its own errors: a perftop bug must never surface in user code.

With the C tracker (see impl.py) the two wrappers are C objects doing what the Python
ones below do, without a Python frame; the Python ones are the reference."""

from __future__ import annotations

import functools
import itertools
import time
from typing import Any

from perftop.events import LoaderInfo
from perftop.hook import impl
from perftop.hook.state import HookState

_perf = time.perf_counter


def patch_torch(state: HookState) -> None:
    import torch
    import torch.optim.optimizer as optim_mod
    import torch.utils.data.dataloader as dl

    tracker = state.tracker

    # -- optimizer: global hooks (torch >= 2.0); the tracker's own guarded methods ---------
    state.handles.append(optim_mod.register_optimizer_step_pre_hook(tracker.opt_pre_hook))
    state.handles.append(optim_mod.register_optimizer_step_post_hook(tracker.opt_post_hook))

    # -- backward: Tensor.backward calls torch.autograd.backward -------------------------
    orig_backward = torch.autograd.backward
    fast = impl.speedups if impl.is_fast(tracker) else None

    @functools.wraps(orig_backward)
    def backward(*args: Any, _perf: Any = _perf, **kwargs: Any) -> Any:
        t0 = _perf()
        try:
            return orig_backward(*args, **kwargs)
        finally:
            try:
                tracker.backward(t0, _perf())
            except Exception:
                state.internal_error("backward")

    if fast is not None:
        backward = functools.update_wrapper(
            fast.wrap_backward(orig_backward, tracker), orig_backward
        )
    torch.autograd.backward = backward
    state.undo.append(lambda: setattr(torch.autograd, "backward", orig_backward))

    # -- DataLoader: time blocked in __next__, settings and worker pids at iter start -----
    base = dl._BaseDataLoaderIter
    orig_next = base.__next__

    @functools.wraps(orig_next)
    def __next__(self: Any, _perf: Any = _perf) -> Any:
        t0 = _perf()
        got = False
        try:
            batch = orig_next(self)
            got = True
            return batch
        finally:
            try:
                tracker.fetched(t0, _perf(), got)
            except Exception:
                state.internal_error("DataLoader.__next__")

    if fast is not None:
        __next__ = functools.update_wrapper(fast.wrap_next(orig_next, tracker), orig_next)
    base.__next__ = __next__
    state.undo.append(lambda: setattr(base, "__next__", orig_next))

    loader_ids: dict[int, int] = {}
    counter = itertools.count()

    for cls in (dl._SingleProcessDataLoaderIter, dl._MultiProcessingDataLoaderIter):
        _wrap_init(state, cls, loader_ids, counter)


def _wrap_init(state: HookState, cls: type, loader_ids: dict[int, int], counter: Any) -> None:
    orig_init = cls.__init__

    @functools.wraps(orig_init)
    def __init__(self: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, loader, *args, **kwargs)
        try:
            key = id(loader)
            if key not in loader_ids:
                if len(loader_ids) > 10000:
                    loader_ids.clear()
                loader_ids[key] = next(counter)
            workers = tuple(
                (i, int(w.pid))
                for i, w in enumerate(getattr(self, "_workers", ()) or ())
                if w.pid is not None
            )
            state.sender.put(
                LoaderInfo(
                    t=time.time(),
                    pid=state.sender.pid,
                    loader_id=loader_ids[key],
                    num_workers=int(loader.num_workers),
                    batch_size=loader.batch_size,
                    pin_memory=bool(loader.pin_memory),
                    prefetch_factor=loader.prefetch_factor if loader.num_workers else None,
                    persistent_workers=bool(loader.persistent_workers),
                    workers=workers,
                    dataset=type(loader.dataset).__name__,
                )
            )
        except Exception:
            state.internal_error("DataLoader iterator")

    cls.__init__ = __init__
    state.undo.append(lambda: setattr(cls, "__init__", orig_init))
