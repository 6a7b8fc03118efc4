"""The plain-Python builds of ``perftop_passthrough`` and ``perftop_hook``
(``_steps_fast.h``), for an interpreter the compiled tracker cannot load into.

``passthrough``: a callable that calls ``orig`` with its caller's arguments, then
``done(target, t0, t1, ok, first_arg)`` with perf_counter seconds around the call (the C
one passes the arguments on without building a tuple and a dict). Nothing of perftop's
reaches the caller: ``done`` catches its own errors, and anything but an interrupt it
raises anyway is dropped."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

_perf = time.perf_counter


def passthrough(
    orig: Callable[..., Any], target: Any, done: Callable[[Any, float, float, bool, Any], Any]
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
            except Exception:  # noqa: S110 - never into the caller's code
                pass

    return call


def hook(target: Any, fn: Callable[..., Any]) -> Any:
    """The plain-Python ``perftop_hook``: h(a, b, c) calls fn(target, a, b, c); a call of
    another shape does nothing (torch's optimizer hooks are called with three)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if len(args) != 3 or kwargs:
            return None
        return fn(target, *args)

    return call
