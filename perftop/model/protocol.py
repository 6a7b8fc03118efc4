"""What the hub feeds (any model that applies events and hands out snapshots), and what
a session is handed to show hints (the rules live above the model).

A node's :class:`~perftop.model.session.Session` and a collector's
:class:`~perftop.model.fleet.FleetSession` both are one, so the hub and the flows take either
without knowing which.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from perftop.events import Event
from perftop.model.snapshot import Hint, Snapshot


class SessionModel(Protocol):
    def apply(self, ev: Event) -> None:
        """Fold one event into the model (events arrive in stream order)."""

    def snapshot(self, *, now: float | None = ..., window: int | None = ...) -> Snapshot:
        """An immutable view; ``window=None`` gives whole-run figures (for reports)."""


class Hinter(Protocol):
    """The hints a :class:`~perftop.model.session.Session` shows, handed to it (the rules
    live above the model: ``perftop.hints.SessionHints``). Fed on the events' clock, so a
    replay raises the same hints at the same moments as the live run."""

    next_t: float | None  # the event time of the next evaluation (None: none yet)

    def due(self, t: float | None) -> bool:
        """Whether the live rules should look at the session at event time ``t``."""

    def update(self, snap: Snapshot) -> None:
        """Evaluate the live rules on ``snap`` (a live-window snapshot at the due time)."""

    def hints(
        self, snap: Snapshot, window: int | None, whole: Callable[[], Snapshot], key: int
    ) -> tuple[Hint, ...]:
        """The hints of ``snap``, handed out with ``window``; ``whole()`` gives the whole
        run's figures, ``key`` changes whenever the session does (for caching)."""


class NoHints:
    """A session without hint rules (exports, tests of the figures alone)."""

    next_t: float | None = None

    def due(self, t: float | None) -> bool:
        return False

    def update(self, snap: Snapshot) -> None:
        pass

    def hints(
        self, snap: Snapshot, window: int | None, whole: Callable[[], Snapshot], key: int
    ) -> tuple[Hint, ...]:
        return ()
