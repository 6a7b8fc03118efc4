"""Model checkpoints for seeking: a session kept at a point, as compressed bytes.

A session is bounded (rings, sketches, capped deques: see :mod:`perftop.model.steps`), so a
checkpoint is its pickle, compressed (tens of kB): what the index keeps in memory and what the
saved index (:mod:`perftop.replay.saved`) writes. Reading one back only ever builds perftop's
own classes and a few containers (:class:`_Unpickler`), whatever the bytes say.
"""

from __future__ import annotations

import io
import os
import pickle
import zlib
from dataclasses import dataclass

from perftop.model import Session


@dataclass
class Checkpoint:
    """A session as it was after ``events`` events: reading resumes at file ``offset``,
    passing over its first ``skip`` events."""

    offset: int
    events: int
    last_t: float | None
    steps: dict[int, int]  # steps per pid so far
    data: bytes | None  # the session's bytes; None: at ``saved`` (sidecar path, offset, size)
    hints: tuple[str, ...] = ()  # hint ids shown at this point
    between: tuple[tuple[str, int], ...] = ()  # (kind, count) of between-steps intervals
    saved: tuple[str, int, int] | None = None
    skip: int = 0

    @classmethod
    def take(cls, session: Session, offset: int, skip: int = 0) -> Checkpoint:
        data = session_bytes(session)
        steps = step_counts(session)
        return cls(offset, session.events, session.last_t, steps, data, skip=skip)

    def blob(self) -> bytes:
        if self.data is not None:
            return self.data
        if self.saved is None:
            raise ValueError("a checkpoint with neither its bytes nor where they are saved")
        path, at, size = self.saved
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            f.seek(at)
            data = f.read(size)
        if len(data) != size:
            raise ValueError(f"{path}: saved index cut short")
        return data

    def restore(self) -> Session:
        """A fresh session equal to the one checkpointed, free to go on on its own."""
        return session_from(self.blob())


def session_bytes(session: Session) -> bytes:
    return zlib.compress(pickle.dumps(session, pickle.HIGHEST_PROTOCOL), 1)


def session_from(data: bytes) -> Session:
    try:
        session = _Unpickler(io.BytesIO(zlib.decompress(data))).load()
    except (pickle.UnpicklingError, zlib.error, EOFError, AttributeError, ImportError) as exc:
        raise ValueError(f"damaged checkpoint: {exc}") from None
    if not isinstance(session, Session):
        raise ValueError("damaged checkpoint: not a session")
    return session


_SAFE = {
    "builtins": {"set", "frozenset", "complex", "range", "slice", "bytearray"},
    "collections": {"deque", "Counter", "OrderedDict", "defaultdict"},
    "array": {"array", "_array_reconstructor"},
    "copyreg": {"_reconstructor"},
}


_OWN = (["perftop", "model"], ["perftop", "events"], ["perftop", "hints"])


def _rules() -> tuple[object, ...]:
    """The hint rules a session's engine holds (functions, the only ones allowed)."""
    from perftop.hints.engine import RULES

    return RULES


class _Unpickler(pickle.Unpickler):
    """Builds classes of perftop's model, events and hints, and plain containers only."""

    def find_class(self, module: str, name: str) -> object:
        if module in _SAFE and name in _SAFE[module]:
            return super().find_class(module, name)
        if module.split(".")[:2] in _OWN:
            obj = super().find_class(module, name)
            if isinstance(obj, type) or obj in _rules():
                return obj
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a checkpoint")


def step_counts(session: Session) -> dict[int, int]:
    out: dict[int, int] = {}
    for reducer in session.reducers:
        for pid, series in getattr(reducer, "series", {}).items():
            out[pid] = series.count
    return out
