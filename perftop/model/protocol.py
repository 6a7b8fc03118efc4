"""What the hub feeds: any model that applies events and hands out snapshots.

A node's :class:`~perftop.model.session.Session` and a collector's
:class:`~perftop.model.fleet.FleetSession` both are one, so the hub and the flows take either
without knowing which.
"""

from __future__ import annotations

from typing import Protocol

from perftop.events import Event
from perftop.model.snapshot import Snapshot


class SessionModel(Protocol):
    def apply(self, ev: Event) -> None:
        """Fold one event into the model (events arrive in stream order)."""

    def snapshot(self, *, now: float | None = ..., window: int | None = ...) -> Snapshot:
        """An immutable view; ``window=None`` gives whole-run figures (for reports)."""
