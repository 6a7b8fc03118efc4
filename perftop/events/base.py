"""Typed, versioned events: the one stream that hook, probes, socket, file and replay share.

Standard library only: the in-process hook imports this module.

Encoding: each event is a JSON array ``[tag, field1, field2, ...]`` in the dataclass's field
order. Fields are only ever appended, never reordered or removed, so a reader fills missing
trailing fields with their defaults (an older writer) and ignores extra ones (a newer writer
of the same major format version). Unknown tags are skipped and counted, not fatal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

T = TypeVar("T")

if TYPE_CHECKING:  # the checker's stubs; never imported at run time (the hook is stdlib only)
    from typing_extensions import dataclass_transform
else:
    try:
        from typing import dataclass_transform
    except ImportError:  # Python 3.10: only a marker for checkers, so a no-op does

        def dataclass_transform(**_: Any) -> Callable[[T], T]:
            return lambda f: f


FORMAT_VERSION = 1


_BY_TAG: dict[str, type[Event]] = {}


class Event:
    """Base of every event; subclasses are created with :func:`event`."""

    __slots__ = ()
    TAG: ClassVar[str] = ""
    _FIELDS: ClassVar[tuple[str, ...]] = ()
    _TUPLE_FIELDS: ClassVar[tuple[int, ...]] = ()
    _REQUIRED: ClassVar[int] = 0
    _DEFAULTS: ClassVar[tuple[Any, ...]] = ()
    # Builds an instance from a full list of field values, skipping the frozen
    # dataclass __init__ (twice as fast; decoding is the monitor's hottest loop).
    _make: ClassVar[Any] = None

    def encode(self) -> list[Any]:
        """The JSON-ready array form of this event."""
        return [self.TAG, *(getattr(self, name) for name in self._FIELDS)]


@dataclass_transform(frozen_default=True)
def event(tag: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: a frozen, slotted dataclass registered under ``tag``.

    ``dataclass_transform`` tells type checkers what the decorator makes, so every event's
    constructor is checked field by field."""

    def register(cls: type[T]) -> type[T]:
        if tag in _BY_TAG:
            raise ValueError(f"event tag {tag!r} registered twice")
        made: Any = dataclasses.dataclass(frozen=True, slots=True)(cls)
        fields = dataclasses.fields(made)
        made.TAG = tag
        made._FIELDS = tuple(f.name for f in fields)
        made._TUPLE_FIELDS = tuple(
            i for i, f in enumerate(fields) if str(f.type).startswith(("tuple", "Tuple"))
        )
        made._REQUIRED = sum(
            1
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        made._DEFAULTS = tuple(f.default for f in fields[made._REQUIRED :])
        if all(f.default_factory is dataclasses.MISSING for f in fields):
            made._make = staticmethod(_fast_constructor(made, made._FIELDS))
        _BY_TAG[tag] = made
        return made  # type: ignore[no-any-return]  # the dataclass of ``cls``

    return register


class DecodeError(ValueError):
    """An event array that does not fit its type."""


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _fast_constructor(cls: type, names: tuple[str, ...]) -> Any:
    """``make(values)``: set each slot directly, as the dataclass __init__ would."""
    env: dict[str, Any] = {"new": object.__new__, "cls": cls}
    for i, name in enumerate(names):
        env[f"s{i}"] = getattr(cls, name).__set__
    body = "".join(f"    s{i}(o, v[{i}])\n" for i in range(len(names)))
    exec(f"def make(v):\n    o = new(cls)\n{body}    return o\n", env)
    return env["make"]


def decode(item: Any) -> Event | None:
    """One event from its array form; None for an unknown tag (a newer writer's type)."""
    if not isinstance(item, list) or not item or not isinstance(item[0], str):
        raise DecodeError(f"not an event array: {item!r:.80}")
    cls = _BY_TAG.get(item[0])
    if cls is None:
        return None
    n = len(cls._FIELDS)
    values = item[1 : 1 + n]
    for i in cls._TUPLE_FIELDS:
        if i < len(values) and isinstance(values[i], list):
            values[i] = _freeze(values[i])
    if cls._make is not None:
        have = len(values)
        if have < n:
            if have < cls._REQUIRED:
                raise DecodeError(f"bad {item[0]!r} event: {have} of {cls._REQUIRED} fields")
            values.extend(cls._DEFAULTS[have - cls._REQUIRED :])
        made: Event = cls._make(values)
        return made
    try:
        return cls(*values)
    except TypeError as exc:  # too few values for fields without defaults
        raise DecodeError(f"bad {item[0]!r} event: {exc}") from None


def registered() -> dict[str, type[Event]]:
    """Every known tag and its class (for tests and docs)."""
    return dict(_BY_TAG)
