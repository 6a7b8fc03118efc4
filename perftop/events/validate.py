"""Events checked against their own types, at a reader's edge: a frame whose CRC checks may
still hold what no writer of perftop makes (a version ``"2"``, a step time that is a string,
``null`` or NaN, output text that is an object, nesting thousands deep). Such an event is
refused with :class:`~perftop.events.base.DecodeError` before anything computes with it.

Each event type's checker is built once from its dataclass fields' types: ``int`` (not a
bool, within 64 bits), ``float`` (a finite number), ``bool``, ``str``, ``X | None``,
``tuple[X, ...]``, fixed tuples and ``dict[str, X]``; ``Any`` is any JSON value at most
``MAX_DEPTH`` deep. Standard library only.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable
from typing import Any

from perftop.events.base import DecodeError, Event

MAX_DEPTH = 8  # nesting of a JSON value inside an event field
INT_MAX = 1 << 63

Check = Callable[[Any, int], bool]  # (value, depth) -> fits
_CHECKERS: dict[type, tuple[tuple[str, Check], ...]] = {}


def _int(v: Any, d: int) -> bool:
    return type(v) is int and -INT_MAX <= v < INT_MAX


def _float(v: Any, d: int) -> bool:
    t = type(v)
    return (t is float and math.isfinite(v)) or (t is int and -INT_MAX <= v < INT_MAX)


def _bool(v: Any, d: int) -> bool:
    return type(v) is bool


def _str(v: Any, d: int) -> bool:
    return type(v) is str


def _any(v: Any, d: int) -> bool:
    if d > MAX_DEPTH:
        return False
    if isinstance(v, (list, tuple)):
        return all(_any(x, d + 1) for x in v)
    if isinstance(v, dict):
        return all(type(k) is str and _any(x, d + 1) for k, x in v.items())
    if type(v) is float:
        return math.isfinite(v)
    return v is None or type(v) in (str, bool) or _int(v, d)


_SCALARS: dict[Any, Check] = {int: _int, float: _float, bool: _bool, str: _str, Any: _any}


def _checker(tp: Any) -> Check:
    """The check for one field's type (an unknown form: any JSON value, depth-bounded)."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        opts = [_checker(a) for a in args if a is not type(None)]
        nullable = type(None) in args
        return lambda v, d: (nullable and v is None) or any(c(v, d) for c in opts)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _checker(args[0])
            return lambda v, d: (
                isinstance(v, (tuple, list)) and d <= MAX_DEPTH and all(item(x, d + 1) for x in v)
            )
        fixed = [_checker(a) for a in args]
        return lambda v, d: (
            isinstance(v, (tuple, list))
            and len(v) == len(fixed)
            and d <= MAX_DEPTH
            and all(c(x, d + 1) for c, x in zip(fixed, v, strict=True))
        )
    if origin is dict:
        key, val = (_checker(a) for a in args)
        return lambda v, d: (
            isinstance(v, dict)
            and d <= MAX_DEPTH
            and all(key(k, d + 1) and val(x, d + 1) for k, x in v.items())
        )
    return _any


def _checks(cls: type) -> tuple[tuple[str, Check], ...]:
    got = _CHECKERS.get(cls)
    if got is None:
        hints = typing.get_type_hints(cls)
        got = _CHECKERS[cls] = tuple((f, _checker(hints[f])) for f in cls._FIELDS)  # type: ignore[attr-defined]
    return got


def check(ev: Event) -> None:
    """Raise :class:`DecodeError` when a field of ``ev`` is not of its declared type."""
    for name, fits in _checks(type(ev)):
        if not fits(getattr(ev, name), 1):
            raise DecodeError(f"bad {ev.TAG!r} event: {name} is not of its type")


def check_all(events: list[Event]) -> None:
    """:func:`check` for each of ``events``."""
    for ev in events:
        check(ev)


def check_packed_steps(events: list[Event]) -> None:
    """:func:`check` for steps unpacked from records: their ints and source are the
    struct's own, so only their times are left to check (finite)."""
    isfinite = math.isfinite
    for ev in events:
        e: Any = ev
        if not (
            isfinite(e.t0)
            and isfinite(e.t1)
            and isfinite(e.data)
            and isfinite(e.backward)
            and isfinite(e.optimizer)
        ):
            raise DecodeError("bad 'step' record: a time that is not a finite number")
