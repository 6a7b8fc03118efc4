"""A session at a position in a recording: forward by applying events, anywhere else by
restoring the nearest checkpoint of the index and applying what follows.

Positions are counted in events (``session.events``), in event time (``session.last_t``,
the clock the live TUI shows) and in steps of the primary process. Not thread-safe: one
thread owns a player.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from perftop.errors import RecordingError
from perftop.events import Event
from perftop.hints.session import hinted_session
from perftop.model import Snapshot
from perftop.model.job_reducers import MetaReducer
from perftop.reader import FrameScanner, open_recording
from perftop.recording import ReadStats
from perftop.replay.checkpoint import Checkpoint
from perftop.replay.index import ReplayIndex, primary_pid, steps_reducer
from perftop.wire import MAGIC


def event_time(ev: Event) -> float | None:
    t = getattr(ev, "t", None)
    return t if t is not None else getattr(ev, "t1", None)


class Player:
    def __init__(self, index: ReplayIndex) -> None:
        self.index = index
        self.stats = ReadStats()
        p, self._file, size = open_recording(index.path)
        self._scanner = FrameScanner(p, self._file, size, self.stats)
        self._reset(None)
        if self._peek() is None:
            self._file.close()
            why = f" ({self.stats.warnings[0]})" if self.stats.warnings else ""
            raise RecordingError(f"{p}: no events in this recording{why}")

    def close(self) -> None:
        self._file.close()

    def _reset(self, cp: Checkpoint | None) -> None:
        self.session = cp.restore() if cp is not None else hinted_session()
        self._chunks = self._scanner.chunks(cp.offset if cp is not None else len(MAGIC))
        self._buf: deque[Event] = deque()
        self.at_end = False
        skip = cp.skip if cp is not None else 0
        while skip > 0 and (chunk := next(self._chunks, None)) is not None:
            self._buf.extend(chunk.events[skip:])
            skip -= min(skip, len(chunk.events))

    def _peek(self) -> Event | None:
        while not self._buf:
            chunk = next(self._chunks, None)
            if chunk is None:
                self.at_end = True
                return None
            self._buf.extend(chunk.events)
        return self._buf[0]

    def _apply_while(self, keep_going: Callable[[Event], bool]) -> int:
        n, apply = 0, self.session.apply
        while (ev := self._peek()) is not None and keep_going(ev):
            apply(self._buf.popleft())
            n += 1
        return n

    # -- where we are ------------------------------------------------------------------------
    @property
    def events(self) -> int:
        return self.session.events

    @property
    def now(self) -> float | None:
        return self.session.last_t

    @property
    def finished(self) -> bool:
        """No event left to apply."""
        return self._peek() is None

    def session_start(self) -> float | None:
        meta = next((r for r in self.session.reducers if isinstance(r, MetaReducer)), None)
        return meta.meta.start_t if meta is not None else None

    def primary(self) -> int | None:
        return primary_pid(self.session)

    def steps(self) -> int:
        pid, sr = self.primary(), steps_reducer(self.session)
        if pid is None or sr is None:
            return 0
        return sr.series[pid].count

    def snapshot(self) -> Snapshot:
        return self.session.snapshot()

    # -- moving ------------------------------------------------------------------------------
    def forward(self, n: int = 1) -> int:
        left = [n]

        def more(_: Event) -> bool:
            left[0] -= 1
            return left[0] >= 0

        return self._apply_while(more)

    def advance_to(self, t: float) -> int:
        """Apply every event up to time ``t`` (events without a time go along)."""

        def due(ev: Event) -> bool:
            et = event_time(ev)
            return et is None or et <= t

        return self._apply_while(due)

    def advance_for(self, seconds: float) -> int:
        """As many events as fit in ``seconds`` of wall time ("as fast as possible")."""
        deadline, n = time.perf_counter() + seconds, 0
        while not self.at_end and time.perf_counter() < deadline:
            n += self.forward(500)
        return n

    def seek_event(self, k: int) -> None:
        k = max(0, k)
        cp = self.index.before_event(k)
        if k < self.events or (cp is not None and cp.events > self.events):
            self._reset(cp)
        self.forward(k - self.events)

    def seek_time(self, t: float) -> None:
        now = self.now
        cp = self.index.before_time(t)
        if now is None or t < now or (cp is not None and cp.events > self.events):
            self._reset(cp)
        self.advance_to(t)

    def seek_step(self, n: int) -> None:
        pid = self.primary() or self.index.primary
        if pid is None:
            return
        cp = self.index.before_step(pid, n)
        if n < self.steps() or (cp is not None and cp.events > self.events):
            self._reset(cp)
        sr = steps_reducer(self.session)

        def before(_: Event) -> bool:
            s = sr.series.get(pid) if sr is not None else None
            return s is None or s.count < n

        self._apply_while(before)
