"""The pure session model: events in, immutable snapshots out."""

from perftop.model.protocol import SessionModel
from perftop.model.session import Session
from perftop.model.snapshot import Snapshot

__all__ = ["Session", "SessionModel", "Snapshot"]
