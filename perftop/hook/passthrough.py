"""The plain-Python builds of the compiled tracker's C primitives (``_steps_fast.h``), for
an interpreter the extension cannot load into. ``PRIMITIVES`` names them as steps.py does.

``passthrough``: a callable that calls ``orig`` with its caller's arguments, then
``done(target, t0, t1, ok, first_arg)`` with perf_counter seconds around the call (the C
one passes the arguments on without building a tuple and a dict). Nothing of perftop's
reaches the caller: an error of ``done`` (or of a hook's ``fn``) is reported with
``target._error(where)`` and dropped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from perftop.wire import STEP_RECORD

_perf = time.perf_counter


def failed(target: Any, where: str) -> None:
    """perftop's function raised: tell the tracker (``target._error``), never the caller."""
    try:
        target._error(where)
    except Exception:
        pass


def passthrough(
    orig: Callable[..., Any],
    target: Any,
    done: Callable[[Any, float, float, bool, Any], Any],
    where: str,
) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        t0 = _perf()
        ok = False
        try:
            res = orig(*args, **kwargs)
            ok = True
            return res
        finally:
            try:
                done(target, t0, _perf(), ok, args[0] if args else None)
            except Exception:
                failed(target, where)

    return call


_depth = [0]  # outermost-only pass-throughs in progress (the C build's is a C int)


def passthrough_outer(
    orig: Callable[..., Any],
    target: Any,
    done: Callable[[Any, float, float, bool, Any], Any],
    where: str,
) -> Any:
    """A pass-through whose ``done`` runs for the outermost call only: a backward that
    runs inside another (reentrant checkpointing) is part of the outer one's time. One
    depth for all of them, so ``autograd.grad`` and ``backward`` nest in each other."""

    def call(*args: Any, **kwargs: Any) -> Any:
        t0 = _perf()
        ok = False
        _depth[0] += 1
        try:
            res = orig(*args, **kwargs)
            ok = True
            return res
        finally:
            _depth[0] -= 1
            if _depth[0] == 0:
                try:
                    done(target, t0, _perf(), ok, args[0] if args else None)
                except Exception:
                    failed(target, where)

    return call


def hook(target: Any, fn: Callable[..., Any], where: str) -> Any:
    """The plain-Python ``perftop_hook``: h(a, b, c) calls fn(target, a, b, c); a call of
    another shape does nothing (torch's optimizer hooks are called with three)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if len(args) != 3 or kwargs:
            return None
        try:
            return fn(target, *args)
        except Exception:
            failed(target, where)
            return None

    return call


def refers(ref: Any, obj: Any) -> bool:
    """Whether the weak reference ``ref`` (None: no) points at ``obj``."""
    return ref is not None and ref() is obj


def _call(f: Callable[[], Any]) -> Any:
    return f()


def _false(*_: Any) -> bool:
    return False


def ring_store(buf: Any, at: int, pid: int, index: float, t0: float, t1: float, data: float,
               bwd: float, opt: float, src: float) -> None:  # fmt: skip
    """One step record at ``buf[at:]``, as the wire packs it (``STEP_RECORD``)."""
    STEP_RECORD.pack_into(buf, at, pid, int(index), t0, t1, data, bwd, opt, int(src))


# steps.py's names for them. Grad mode: torch.is_grad_enabled() (the C build reads c10's
# flag once ``grad_resolve`` found it; the plain build never does).
PRIMITIVES: dict[str, Any] = {
    "_now": _perf,
    "_passthrough": passthrough,
    "_hook": hook,
    "_grad": _call,
    "_grad_resolve": _false,
    "_grad_forget": _false,
    "_refers": refers,
    "_thread": threading.get_ident,
    "_passthrough_outer": passthrough_outer,
    "_ring_ptr": lambda buf: buf,  # the ring's memoryview: stored into as in C
    "_ring_store": ring_store,
}
