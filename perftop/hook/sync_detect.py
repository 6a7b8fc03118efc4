"""The dispatch-level detector: ops that make the host wait when their tensors live on an
accelerator. On a CPU run, labelled ``potential``, and only on tensors a GPU run would keep
on the device (``sync_marks``); on CUDA, labelled ``sync`` where the sync debug mode,
switched on around the call (``sync_cuda``), confirms it.

A ``TorchFunctionMode`` rather than a ``TorchDispatchMode``: it sees the call the user
wrote (``x[mask]``, ``t.tolist()``, ``int(t)``), which on CPU never reaches the dispatcher,
and only the outermost torch call, so torch's own internals (an optimizer reading its step
counter) are not the user's. A call counts only when its direct caller is user code. The
mode costs every torch call while it is on: it is pushed only for the sampled steps, at
the bottom of the stack, by the training thread.

A non-blocking host-to-device copy from pageable memory is a real stall on an accelerator
(kind ``sync``). Copies towards the CPU count only from an accelerator's tensor. On an
accelerator, the host time inside a syncing call is the wait (the queue draining, then the
copy): carried as ``blocked_s``. On the CPU nothing is measured.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from perftop.hook.frames import direct_caller, first_outside
from perftop.hook.frames import where as site_of
from perftop.hook.sync_marks import NOT_DEVICES, Marks

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


def make_detector(torch: Any, collector: Any, state: Any, real: Any = None) -> Any:
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

    marks = Marks(torch)
    C = torch._C
    real_ok = getattr(torch.version, "cuda", None) is not None

    class Detector(TorchFunctionMode):
        not_devices = NOT_DEVICES

        def __init__(self) -> None:
            super().__init__()
            self.active = False
            self.off = False  # asked to stop from another thread: pass calls through
            self.thread: int | None = None
            self.marks = marks
            self.real: Any = None  # RealSyncs, armed for this sample (CUDA initialized)
            self.real_syncs = real

        def __torch_function__(
            self,
            func: Any,
            types: Any,
            args: tuple[Any, ...] = (),
            kwargs: dict[str, Any] | None = None,
        ) -> Any:
            if kwargs is None:
                kwargs = {}
            if self.off:
                return func(*args, **kwargs)
            try:
                check = cache[func]
            except KeyError:
                check = cache[func] = classify(func)
            except TypeError:  # an unhashable callable
                check = classify(func)
            op, timed = None, False
            if check is not None:
                try:
                    op = check(args, kwargs)
                    if op is not None and op[0] != "!" and not marks.any_bound(args):
                        op = None  # a host tensor: no sync on any device
                    timed = op is not None and (op[0] == "!" or on_device(args))
                except Exception:
                    state.internal_error("sync detector")
            rs = self.real
            if rs is not None:
                out, n, dt = rs.call(func, args, kwargs)
                if n:
                    self.seen(
                        op.lstrip("!") if op else getattr(func, "__name__", "sync"), dt, "sync", n
                    )
                elif op is not None and (op[0] == "!" or rs.orig is None):
                    self.seen(op, dt if timed else None)
                return out
            if op is not None:
                if not timed:
                    self.seen(op, None)
                    out = func(*args, **kwargs)
                else:
                    t0 = perf()
                    out = func(*args, **kwargs)
                    self.seen(op, perf() - t0)
            else:
                out = func(*args, **kwargs)
            if marks.virtual:
                try:
                    out = marks.spread(getattr(func, "__name__", ""), args, kwargs, out)
                except Exception:
                    state.internal_error("sync detector (marks)")
            return out

        def seen(self, op: str, blocked_s: float | None, kind: str = "", n: int = 1) -> None:
            try:
                caller = sys._getframe(2)
                frame = direct_caller(caller)
                if frame is None:
                    if kind != "sync":
                        return
                    frame = first_outside(caller)  # a real sync inside torch's own code
                    if frame is None:
                        return
                if not kind:
                    kind = "potential"
                    if op[0] == "!":
                        op, kind = op[1:], "sync"
                collector.add((op, kind, site_of(frame)), blocked_s, n)
            except Exception:
                state.internal_error("sync detector")

        def start(self) -> None:
            """Push this mode at the bottom of the stack (above a ``DeviceContext``, which
            must stay lowest), as torch's ``DeviceContext`` does: a user's mode entered
            before and left after pops itself, never this one."""
            if self.active:
                return
            self.thread = threading.get_ident()
            self.off = False
            virtual = not (real_ok and torch.cuda.is_initialized())
            marks.virtual = virtual
            rs = self.real_syncs
            if rs is not None and not virtual and not rs.aside:
                rs.arm()
                self.real = rs
            _insert_at_bottom(C, self)
            self.active = True

        def stop(self) -> None:
            """Out from wherever it is, on the thread that pushed it; another thread only
            asks (calls pass through until then)."""
            if not self.active:
                return
            if threading.get_ident() != self.thread:
                self.off = True
                return
            _remove(C, self)
            self.active = False
            self.off = False
            if self.real is not None:
                self.real.disarm()
                self.real = None

        def forget(self) -> None:
            """In a forked child (a DataLoader worker): no sampling; off its stack."""
            try:
                if self.active and threading.get_ident() == self.thread:
                    _remove(C, self)
            except Exception:
                pass
            self.active = False
            self.off = True
            self.real = None
            marks.ids.clear()

    detector = Detector()
    return detector


def _insert_at_bottom(C: Any, mode: Any) -> None:
    above = [C._pop_torch_function_stack() for _ in range(C._len_torch_function_stack())]
    keep = 0  # a DeviceContext (torch.set_default_device) stays at the very bottom
    if above and type(above[-1]).__name__ == "DeviceContext":
        keep = 1
        C._push_on_torch_function_stack(above[-1])
    C._push_on_torch_function_stack(mode)
    for m in reversed(above[: len(above) - keep]):
        C._push_on_torch_function_stack(m)


def _remove(C: Any, mode: Any) -> None:
    above = []
    while C._len_torch_function_stack():
        m = C._pop_torch_function_stack()
        if m is mode:
            break
        above.append(m)
    for m in reversed(above):
        C._push_on_torch_function_stack(m)
