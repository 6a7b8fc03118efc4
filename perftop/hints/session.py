"""The hints a session shows: the live engine's, with persistence, and the whole-run
verdict once the job is over or for whole-run figures (reports). Handed to the model's
:class:`~perftop.model.session.Session`, which does not import the rules."""

from __future__ import annotations

from collections.abc import Callable

from perftop.hints.engine import HintEngine
from perftop.hints.verdict import merge, verdict
from perftop.model.session import Session
from perftop.model.snapshot import Hint, Snapshot


class SessionHints(HintEngine):
    """A :class:`~perftop.model.protocol.Hinter`: the live engine, and the verdict of
    every rule over the whole run, computed once per state of the session."""

    def __init__(self) -> None:
        super().__init__()
        self._verdict_at = -1
        self._verdict: tuple[Hint, ...] = ()

    def hints(
        self, snap: Snapshot, window: int | None, whole: Callable[[], Snapshot], key: int
    ) -> tuple[Hint, ...]:
        if window is None:  # whole-run figures: every hint shown during the run, and more
            return merge(self.whole_run(), self._whole(whole, key))
        if snap.meta.ended:
            # The job is over: what the run showed (a hint that left before the end too,
            # its moments kept), and the whole-run verdict's own.
            return merge(self.whole_run(), self._whole(whole, key))
        return self.active()

    def _whole(self, whole: Callable[[], Snapshot], key: int) -> tuple[Hint, ...]:
        if self._verdict_at != key:
            self._verdict = verdict(whole())
            self._verdict_at = key
        return self._verdict


def hinted_session() -> Session:
    """A session that shows hints (what the monitor, replay and reports use)."""
    return Session(hints=SessionHints())
