"""Model checkpoints for seeking: a session copied at a point, cheaply.

A session's bulk is its per-process step arrays, which only ever grow. A checkpoint shares
them with the session it was taken from and remembers their lengths; restoring copies the
first ``n`` entries (one memcpy each). Everything else is small and deep-copied.
"""

from __future__ import annotations

import copy
from array import array
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from perftop.model import Session


def _arrays(session: Session) -> Iterator[array]:
    for reducer in session.reducers:
        for series in getattr(reducer, "series", {}).values():
            for name in getattr(series, "__slots__", ()):
                value = getattr(series, name, None)
                if isinstance(value, array):
                    yield value


@dataclass
class Checkpoint:
    """A session as it was after ``events`` events, resumable at file ``offset``."""

    offset: int
    events: int
    last_t: float | None
    steps: dict[int, int]  # steps per pid so far
    session: Session
    arrays: list[tuple[array, int]] = field(default_factory=list)
    hints: tuple[str, ...] = ()  # hint ids shown at this point
    between: tuple[tuple[str, int], ...] = ()  # (kind, count) of between-steps intervals

    @classmethod
    def take(cls, session: Session, offset: int) -> Checkpoint:
        arrays = [(a, len(a)) for a in _arrays(session)]
        memo: dict[int, object] = {id(a): a for a, _ in arrays}  # shared, not copied
        for obj in _frozen_rows(session):
            memo[id(obj)] = obj
        saved = copy.deepcopy(session, memo)
        return cls(offset, session.events, session.last_t, step_counts(session), saved, arrays)

    def restore(self) -> Session:
        """A fresh session equal to the one checkpointed, free to go on on its own."""
        memo: dict[int, object] = {id(a): a[:n] for a, n in self.arrays}
        for obj in _frozen_rows(self.session):
            memo[id(obj)] = obj
        return copy.deepcopy(self.session, memo)


def _frozen_rows(session: Session) -> Iterator[object]:
    """Immutable rows held in the reducers' containers (recent steps, output lines):
    shared between a checkpoint and its session instead of copied."""
    holders: list[object] = list(session.reducers)
    for reducer in session.reducers:
        holders.extend(getattr(reducer, "series", {}).values())
    for holder in holders:
        names = getattr(holder, "__slots__", None) or list(getattr(holder, "__dict__", {}))
        for name in names:
            value = getattr(holder, name, None)
            if isinstance(value, (deque, list)) and value and _frozen(value[-1]):
                yield from value


def _frozen(obj: object) -> bool:
    params = getattr(type(obj), "__dataclass_params__", None)
    return params is not None and params.frozen


def step_counts(session: Session) -> dict[int, int]:
    out: dict[int, int] = {}
    for reducer in session.reducers:
        for pid, series in getattr(reducer, "series", {}).items():
            out[pid] = len(series.durations)
    return out
