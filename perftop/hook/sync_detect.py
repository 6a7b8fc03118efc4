"""The dispatch-level detector: ops that make the host wait when their tensors live on an
accelerator, caught on any device (CPU included), labelled ``potential``.

A ``TorchFunctionMode`` rather than a ``TorchDispatchMode``: it sees the call the user
wrote (``x[mask]``, ``t.tolist()``, ``t.cpu()``, ``int(t)``), which on CPU never reaches
the dispatcher, and it sees only the outermost torch call, so torch's own internals (an
optimizer reading its step counter) are not mistaken for the user's. A call counts only
when its direct caller is user code. The mode costs every torch call while it is on,
hence it is pushed only for the steps the sampler picks.

A non-blocking host-to-device copy from pageable memory is a real stall on an
accelerator (kind ``sync``); it is caught here too, in the sampled steps. Copies towards
the CPU count only from an accelerator's tensor: on a CPU run, ``.to(device)`` is a
host-to-device copy once the job runs on a GPU, not a read of device data.

When a call's tensors live on an accelerator, the host time spent inside the call is the
time the host waited (the GPU's queue draining, then the copy): it is measured and
carried as ``blocked_s``. On the CPU there is no device to wait for: nothing is measured.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from perftop.hook.frames import direct_caller
from perftop.hook.frames import where as site_of

_SIMPLE = {
    "item": "item",
    "_local_scalar_dense": "item",
    "tolist": "tolist",
    "numpy": "numpy",
    "cpu": "cpu",
    "nonzero": "nonzero",
    "argwhere": "argwhere",
    "unique": "unique",
    "unique_consecutive": "unique_consecutive",
    "masked_select": "masked_select",
    "__int__": "int",
    "__float__": "float",
    "__bool__": "bool",
    "__index__": "index",
    "__complex__": "complex",
    "__format__": "format",
    "__repr__": "repr",
}
NOT_DEVICES = frozenset({"cpu", "meta"})  # copies to these never stall the host


def make_detector(torch: Any, collector: Any, state: Any) -> Any:
    """A detector bound to this torch, or None where torch lacks function modes."""
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        return None
    Tensor = torch.Tensor
    perf = time.perf_counter
    masks = (torch.bool, torch.uint8)
    cache: dict[Any, Callable[..., str | None] | None] = {}

    def is_mask(i: Any) -> bool:
        if isinstance(i, Tensor):
            return i.dtype in masks
        if isinstance(i, tuple | list):
            return any(isinstance(j, Tensor) and j.dtype in masks for j in i)
        return False

    def getitem(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        return "boolean_mask" if len(args) > 1 and is_mask(args[1]) else None

    def repeat_interleave(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        if kwargs.get("output_size") is not None or (len(args) > 3 and args[3] is not None):
            return None
        reps = args[1] if len(args) > 1 else kwargs.get("repeats", args[0] if args else None)
        return "repeat_interleave" if isinstance(reps, Tensor) else None

    def where(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        return "where" if len(args) + len(kwargs) == 1 else None

    def to(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        src = args[0] if args else None
        dev, nb = kwargs.get("device"), kwargs.get("non_blocking", False)
        for a in args[1:]:
            if isinstance(a, str | torch.device):
                dev = a
            elif isinstance(a, Tensor):
                dev = a.device
            elif isinstance(a, bool):
                nb = a
        if dev is None or not isinstance(src, Tensor):
            return None
        dest = torch.device(dev).type
        if dest == "cpu":  # a read of device data only from an accelerator's tensor
            return None if src.device.type in detector.not_devices else "cpu"
        return _pageable(src, dest, nb)

    def cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        nb = kwargs.get("non_blocking", len(args) > 2 and args[2])
        return _pageable(args[0], "cuda", nb) if args else None

    def copy_(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        if len(args) < 2 or not isinstance(args[1], Tensor):
            return None
        nb = kwargs.get("non_blocking", len(args) > 2 and args[2])
        dest, src = args[0].device.type, args[1]
        if dest == "cpu" and src.device.type not in detector.not_devices:
            return "copy_"  # device to host
        return _pageable(src, dest, nb)

    def on_device(args: tuple[Any, ...]) -> bool:
        """Whether the call reads or writes an accelerator's tensor (its time is a wait)."""
        for a in args[:2]:
            if isinstance(a, Tensor) and a.device.type not in detector.not_devices:
                return True
        return False

    def _pageable(src: Any, dest_type: str, non_blocking: Any) -> str | None:
        if not non_blocking or dest_type in detector.not_devices or src.device.type != "cpu":
            return None
        try:
            pinned = src.is_pinned()
        except Exception:
            return None
        return None if pinned else "!pageable_copy"

    special: dict[str, Callable[..., str | None]] = {
        "__getitem__": getitem,
        "repeat_interleave": repeat_interleave,
        "where": where,
        "to": to,
        "cuda": cuda,
        "copy_": copy_,
    }

    def classify(func: Any) -> Callable[..., str | None] | None:
        name = getattr(func, "__name__", "")
        if name in ("_return_output", "_return_inverse", "_return_counts", "_unique_impl"):
            name = "unique"
        if name in _SIMPLE:
            op = _SIMPLE[name]
            return lambda args, kwargs: op
        return special.get(name)

    class Detector(TorchFunctionMode):
        not_devices = NOT_DEVICES

        def __init__(self) -> None:
            super().__init__()
            self.active = False

        def __torch_function__(
            self,
            func: Any,
            types: Any,
            args: tuple[Any, ...] = (),
            kwargs: dict[str, Any] | None = None,
        ) -> Any:
            if kwargs is None:
                kwargs = {}
            try:
                check = cache[func]
            except KeyError:
                check = cache[func] = classify(func)
            except TypeError:  # an unhashable callable
                check = classify(func)
            if check is not None:
                op, timed = None, False
                try:
                    op = check(args, kwargs)
                    timed = op is not None and (op[0] == "!" or on_device(args))
                except Exception:
                    state.internal_error("sync detector")
                if op is not None:
                    if not timed:
                        self.seen(op, None)
                        return func(*args, **kwargs)
                    t0 = perf()
                    out = func(*args, **kwargs)
                    self.seen(op, perf() - t0)
                    return out
            return func(*args, **kwargs)

        def seen(self, op: str, blocked_s: float | None) -> None:
            try:
                frame = direct_caller(sys._getframe(2))
                if frame is None:
                    return
                kind = "potential"
                if op[0] == "!":
                    op, kind = op[1:], "sync"
                collector.add((op, kind, site_of(frame)), blocked_s)
            except Exception:
                state.internal_error("sync detector")

        def start(self) -> None:
            if self.active:
                return
            self.__enter__()
            self.active = True

        def stop(self) -> None:
            """Pop this mode, but only from the top: never pop a user's own mode."""
            n = torch._C._len_torch_function_stack()
            if n and torch._C._get_function_stack_at(n - 1) is self:
                self.__exit__(None, None, None)
                self.active = False

        def forget(self) -> None:
            """In a forked child (a DataLoader worker): no sampling there."""
            try:
                self.stop()
            except Exception:
                pass
            self.active = False

    detector = Detector()
    return detector
