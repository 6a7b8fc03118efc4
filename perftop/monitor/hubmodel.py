"""The hub's session model, guarded: the snapshots its thread takes and hands to the
snapshot subscribers. It stands alone because a model's or a subscriber's failure is said
once and never stops ingest, whatever the queue and the sinks do; :class:`Hub
<perftop.monitor.hub.Hub>` inherits it, and only the hub's thread calls it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from perftop.model import SessionModel, Snapshot
from perftop.monitor.cutoff import CutOffs

SnapshotSink = Callable[[Snapshot], object]


class HubModel:
    """The Hub's session half (:class:`~perftop.monitor.hub.Hub` inherits it)."""

    session: SessionModel
    latest: Snapshot | None
    model_errors: int
    snapshot_subscribers: list[SnapshotSink]
    cutoffs: CutOffs

    def _model_failed(self, what: str, exc: BaseException) -> None:
        """The session raised on an event or a snapshot: said once (the rest counted in
        ``model_errors``); the recording and every sink still get every event, and ingest
        goes on."""
        self.model_errors += 1
        if self.model_errors == 1:
            self.cutoffs.say(
                f"the session model failed on {what} ({type(exc).__name__}: {exc}"[:300]
                + "); the recording keeps every event, the screen may miss some"
            )

    def _steps_now(self) -> int:
        """The session's step count now (a line about a failure says where it came)."""
        try:
            return self.session.snapshot(now=time.time()).steps.count
        except Exception:
            return self.latest.steps.count if self.latest is not None else 0

    def _take_snapshot(self) -> Snapshot | None:
        try:
            return self.session.snapshot(now=time.time())
        except Exception as exc:
            self._model_failed("a snapshot", exc)
            return None

    def _snapshot(self) -> None:
        snap = self._take_snapshot()
        if snap is None:
            return
        self.latest = snap
        for fn in list(self.snapshot_subscribers):
            try:
                fn(snap)
            except Exception as exc:  # a subscriber's bug must not stop ingest: cut it off
                if fn in self.snapshot_subscribers:
                    self.snapshot_subscribers.remove(fn)
                self.cutoffs.subscriber(fn, exc)
