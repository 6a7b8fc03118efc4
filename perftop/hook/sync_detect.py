"""The dispatch-level detector: ops that make the host wait when their tensors live on an
accelerator. On a CPU run, labelled ``potential``, and only on tensors a GPU run would keep
on the device (``sync_marks``); on CUDA, labelled ``sync`` where the sync debug mode,
switched on around the call (``sync_cuda``), confirms it.

A ``TorchFunctionMode`` rather than a ``TorchDispatchMode``: it sees the call the user
wrote (``x[mask]``, ``t.tolist()``, ``int(t)``), which on CPU never reaches the dispatcher,
and only the outermost torch call, so torch's own internals (an optimizer reading its step
counter) are not the user's. A call counts only when its direct caller is user code. The
mode costs every torch call while it is on: it is pushed only for the sampled steps, at
the bottom of the stack, by the training thread, and never stays: ``sync_stack`` owns its
place on the stack (each push has exactly one pop, on every path).

A non-blocking host-to-device copy from pageable memory is a real stall on an accelerator
(kind ``sync``). Copies towards the CPU count only from an accelerator's tensor. On an
accelerator, the host time inside a syncing call is the wait (the queue draining, then the
copy): carried as ``blocked_s``. On the CPU nothing is measured.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from threading import get_ident
from typing import Any

from perftop.hook.call_site import runner, unsplice
from perftop.hook.frames import direct_caller, first_outside
from perftop.hook.frames import where as site_of
from perftop.hook.sync_marks import NOT_DEVICES, Marks
from perftop.hook.sync_ops import classifiers
from perftop.hook.sync_stack import Slot


def make_detector(torch: Any, collector: Any, state: Any, real: Any = None) -> Any:
    """A detector bound to this torch, or None where torch lacks function modes."""
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        return None
    perf = time.perf_counter
    cpu = time.thread_time  # a pass watch's deadline: the training thread's own time
    cache: dict[Any, Callable[..., str | None] | None] = {}

    marks = Marks(torch)
    real_ok = getattr(torch.version, "cuda", None) is not None

    class Detector(TorchFunctionMode):
        not_devices = NOT_DEVICES
        _perftop_sync_mode = True  # sync_stack.MARK: how the step-end check finds it

        def __init__(self) -> None:
            super().__init__()
            self.active = False  # watching (the stack follows at the next safe point)
            self.priming = False  # on the stack for marks only (the step before a watch)
            self.off = True  # not watching: calls pass straight through
            self.slot: Slot
            self.marks = marks
            self.real: Any = None  # RealSyncs, armed for this sample (CUDA initialized)
            self.real_syncs = real
            self.deadline = 0.0  # a pass's watch stops here (thread_time; 0: none)
            self.on_deadline: Callable[[], None] = self.stop  # sync_passes.PassWatch's

        def __torch_function__(
            self,
            func: Any,
            types: Any,
            args: tuple[Any, ...] = (),
            kwargs: dict[str, Any] | None = None,
        ) -> Any:
            if kwargs is None:
                kwargs = {}
            slot = self.slot
            mine = get_ident() == slot.thread
            if mine:
                slot.depth += 1
            run = runner(func, sys._getframe(1))  # warnings read the job's line: call_site
            try:
                if self.deadline and mine and cpu() > self.deadline:
                    try:
                        self.on_deadline()  # a pass's watch outran its budget: off now
                    except Exception:
                        self.deadline = 0.0
                        state.internal_error("sync detector (deadline)")
                if self.off:
                    return run(func, args, kwargs)
                if self.priming:  # the step before a watched one: marks only
                    out = run(func, args, kwargs)
                    try:
                        out = marks.spread(getattr(func, "__name__", ""), args, kwargs, out)
                    except Exception:
                        state.internal_error("sync detector (marks)")
                    return out
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
                    out, n, dt = rs.call(func, args, kwargs, run)
                    if n:
                        self.seen(
                            op.lstrip("!") if op else getattr(func, "__name__", "sync"),
                            dt,
                            "sync",
                            n,
                        )
                    elif op is not None and (op[0] == "!" or rs.orig is None):
                        self.seen(op, dt if timed else None)
                    return out
                if op is not None:
                    if not timed:
                        self.seen(op, None)
                        out = run(func, args, kwargs)
                    else:
                        t0 = perf()
                        out = run(func, args, kwargs)
                        self.seen(op, perf() - t0)
                else:
                    out = run(func, args, kwargs)
                if marks.virtual:
                    try:
                        out = marks.spread(getattr(func, "__name__", ""), args, kwargs, out)
                    except Exception:
                        state.internal_error("sync detector (marks)")
                return out
            except BaseException as exc:
                unsplice(exc)  # the job's line once in a traceback, as plain
                raise
            finally:
                if mine:
                    slot.depth -= 1

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

        def prime(self) -> bool:
            """Learn marks (and count nothing) until the next :meth:`start`: on a CPU run,
            the step before a watched one, so that a value it makes and the watched step
            reads (a metric made before the update, formatted after it) is known for
            device data. Nothing on a GPU run, where a tensor's device tells. Whether
            the mode is on its way to the stack."""
            if self.active or self.priming or (real_ok and torch.cuda.is_initialized()):
                return False
            marks.virtual = True
            marks.prune()
            self.priming = True
            self.slot.request(True)
            return True

        def start(self) -> None:
            """Watch from here: the mode goes at the bottom of the stack (``sync_stack``),
            now where that is safe, else at the next safe point (a primed mode is there
            already: it only starts counting)."""
            if self.active:
                return
            if not self.priming:
                marks.prune()
            self.priming = False
            virtual = not (real_ok and torch.cuda.is_initialized())
            marks.virtual = virtual
            rs = self.real_syncs
            if rs is not None and not virtual and not rs.aside:
                rs.arm()
                self.real = rs
            self.active = True
            self.slot.request(True)

        def stop(self) -> None:
            """Stop watching: calls pass straight through at once; the mode leaves the
            stack now where that is safe, else at the next safe point (``sync_stack``)."""
            if self.priming:
                self.priming = False
                self.slot.request(False)
            if not self.active:
                return
            self.active = False
            if self.real is not None:
                self.real.disarm()
                self.real = None
            self.slot.request(False)

        def forget(self) -> None:
            """In a forked child (a DataLoader worker): no sampling; off its stack."""
            self.active = False
            self.priming = False
            self.real = None
            marks.ids.clear()
            marks.host.clear()
            marks.host.clear()
            try:
                self.slot.forget()
            except Exception:
                pass

    detector = Detector()
    classify, on_device = classifiers(torch, detector)
    detector.slot = Slot(torch, detector, lambda msg: _note(state, msg))
    return detector


def _note(state: Any, msg: str) -> None:
    try:
        state.sender.note("warning", msg)
    except Exception:
        state.internal_error(msg)
