"""What a subscriber that joins mid-run needs first: the session's header and recent history.

The header is the latest of each event that describes the session rather than a moment of
it (the session, the job, each trainer's hello, loaders, sync settings, command lines,
drop counters, notes): a fresh model fed the header and then the history is complete. The
history is the most recent frames, bounded in bytes; the recording is the full source.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from perftop.events import (
    Dropped,
    Event,
    Hello,
    JobExit,
    JobStart,
    LoaderInfo,
    Note,
    ObserverStart,
    ProcInfo,
    SessionStart,
    SyncInfo,
)
from perftop.wire import KIND_JSON, Frame, encode_frame

HISTORY_BYTES = 16 * 1024 * 1024
MAX_PROC_INFO = 2000
MAX_NOTES = 50


def _key(ev: Event) -> Any:
    """The slot an event occupies in the header, or None when it is not a header event."""
    if isinstance(ev, (SessionStart, JobStart, ObserverStart)):
        return type(ev)
    if isinstance(ev, (Hello, SyncInfo)):
        return (type(ev), ev.pid)
    if isinstance(ev, LoaderInfo):
        return (LoaderInfo, ev.pid, ev.loader_id)
    if isinstance(ev, ProcInfo):
        return (ProcInfo, ev.pid)
    if isinstance(ev, Dropped):
        return (Dropped, ev.pid, ev.source)
    if isinstance(ev, Note):
        return (Note, ev.source, ev.text)
    return None


class Header:
    """Latest header events plus a byte-bounded history of frames (monitor thread only)."""

    def __init__(self, history_bytes: int = HISTORY_BYTES) -> None:
        self._slots: OrderedDict[Any, Event] = OrderedDict()
        self._procs = 0
        self._notes = 0
        self.exit: JobExit | None = None
        self.history: deque[Frame] = deque()
        self.history_bytes = 0
        self.history_limit = history_bytes
        self.history_dropped = 0  # frames that fell out of the history

    def note_events(self, events: Iterable[Event]) -> None:
        for ev in events:
            if isinstance(ev, JobExit):
                self.exit = ev
                continue
            key = _key(ev)
            if key is None:
                continue
            if key in self._slots:
                self._slots.move_to_end(key)
            elif isinstance(ev, ProcInfo):
                self._procs += 1
            elif isinstance(ev, Note):
                self._notes += 1
            self._slots[key] = ev
            self._trim()

    def _trim(self) -> None:
        for kind, count, limit in (
            (ProcInfo, "_procs", MAX_PROC_INFO),
            (Note, "_notes", MAX_NOTES),
        ):
            while getattr(self, count) > limit:
                oldest = next(k for k in self._slots if isinstance(k, tuple) and k[0] is kind)
                del self._slots[oldest]
                setattr(self, count, getattr(self, count) - 1)

    def add_frame(self, frame: Frame) -> None:
        self.history.append(frame)
        self.history_bytes += len(frame.payload)
        while self.history_bytes > self.history_limit and len(self.history) > 1:
            old = self.history.popleft()
            self.history_bytes -= len(old.payload)
            self.history_dropped += 1

    def events(self, record_path: str | None = None) -> list[Event]:
        """The header events, session first; ``record_path`` renames the recording."""
        evs = list(self._slots.values())
        evs.sort(key=lambda e: not isinstance(e, SessionStart))
        if record_path is not None:
            evs = [
                replace(e, record_path=record_path) if isinstance(e, SessionStart) else e
                for e in evs
            ]
        return evs

    def preamble(self, record_path: str | None = None) -> list[Frame]:
        """What a new subscriber receives before the live stream: header, history, exit."""
        out: list[Frame] = []
        head = self.events(record_path)
        if head:
            out.append(_frame(head))
        out.extend(self.history)
        if self.exit is not None:
            out.append(_frame([self.exit]))
        return out


def _frame(events: list[Event]) -> Frame:
    data = encode_frame(events)
    return Frame(KIND_JSON, data[12:])
