"""Model checkpoints for seeking: a session copied at a point.

A session is bounded (rings, sketches, capped deques: see :mod:`perftop.model.steps`), so a
checkpoint is a plain copy that shares only the immutable rows held in its containers. A
checkpoint also goes to bytes (pickled, compressed) for the saved index
(:mod:`perftop.replay.saved`): it is read back only from an index this perftop wrote.
"""

from __future__ import annotations

import copy
import pickle
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from perftop.model import Session


@dataclass
class Checkpoint:
    """A session as it was after ``events`` events, resumable at file ``offset``."""

    offset: int
    events: int
    last_t: float | None
    steps: dict[int, int]  # steps per pid so far
    session: Session | None  # None: not loaded yet (a saved index reads it on demand)
    hints: tuple[str, ...] = ()  # hint ids shown at this point
    between: tuple[tuple[str, int], ...] = ()  # (kind, count) of between-steps intervals

    @classmethod
    def take(cls, session: Session, offset: int) -> Checkpoint:
        saved = copy.deepcopy(session, _shared(session))
        return cls(offset, session.events, session.last_t, step_counts(session), saved)

    def restore(self) -> Session:
        """A fresh session equal to the one checkpointed, free to go on on its own."""
        assert self.session is not None
        return copy.deepcopy(self.session, _shared(self.session))


def session_bytes(session: Session) -> bytes:
    return zlib.compress(pickle.dumps(session, pickle.HIGHEST_PROTOCOL), 1)


def session_from(data: bytes) -> Session:
    session = pickle.loads(zlib.decompress(data))
    if not isinstance(session, Session):
        raise ValueError("not a session")
    return session


def _shared(session: Session) -> dict[int, object]:
    return {id(obj): obj for obj in _frozen_rows(session)}


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
            out[pid] = series.count
    return out
