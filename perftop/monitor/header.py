"""What a subscriber that joins mid-run needs first: the session's header and recent history.

The header is the latest of each event that describes the session rather than a moment of
it (the session, the job, each trainer's hello, loaders, sync settings, command lines,
drop counters, notes): a fresh model fed the header and then the history is complete. The
history is the most recent frames, bounded in bytes; the recording is the full source.
"""

from __future__ import annotations

import os
import socket
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import perftop
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
from perftop.model.hang_env import hang_env
from perftop.wire import KIND_JSON, KIND_STEPS, Frame, encode_frame, fitted_frames

HISTORY_BYTES = 16 * 1024 * 1024
MAX_PROC_INFO = 2000
MAX_NOTES = 50


def session_start(
    t: float,
    command: tuple[str, ...],
    *,
    cwd: str | None = None,
    record_path: str = "",
    output: str = "",
) -> SessionStart:
    """The first event of every session this process monitors: what runs, here, by whom,
    the hang thresholds its environment sets (the session's, for whoever reads it), and
    where the job's output goes (``SessionStart.output``)."""
    factor, after = hang_env()
    return SessionStart(
        t=t,
        command=command,
        cwd=os.getcwd() if cwd is None else cwd,
        host=socket.gethostname(),
        monitor_pid=os.getpid(),
        perftop_version=perftop.__version__,
        record_path=record_path,
        hang_factor=factor,
        hang_after_s=after,
        output=output,
    )


# The slot each header event occupies; other events are not header events.
_KEYS: dict[type, Any] = {
    SessionStart: lambda e: SessionStart,
    JobStart: lambda e: JobStart,
    ObserverStart: lambda e: ObserverStart,
    Hello: lambda e: (Hello, e.pid),
    SyncInfo: lambda e: (SyncInfo, e.pid),
    LoaderInfo: lambda e: (LoaderInfo, e.pid, e.loader_id),
    ProcInfo: lambda e: (ProcInfo, e.pid),
    Dropped: lambda e: (Dropped, e.pid, e.source),
    Note: lambda e: (Note, e.source, e.text),
}


class Header:
    """Latest header events plus a byte-bounded history of frames (monitor thread only).

    Each header event remembers the history frame it came in; a preamble repeats only the
    header events whose frame has left the history, so a subscriber sees each event once.
    """

    def __init__(self, history_bytes: int = HISTORY_BYTES) -> None:
        self._slots: OrderedDict[Any, tuple[Event, int | None]] = OrderedDict()
        self._procs = 0
        self._notes = 0
        self.exit: tuple[JobExit, int | None] | None = None
        self.history: deque[tuple[int, Frame]] = deque()
        self._seq = 0
        self.history_bytes = 0
        self.history_limit = history_bytes
        self.history_dropped = 0  # frames that fell out of the history

    def add(self, frame: Frame | None, events: Iterable[Event], header_only: tuple = ()) -> None:
        """Take one item of the stream: ``frame`` (its history form, or None) holds
        ``events`` except those of the ``header_only`` types."""
        seq = None
        if frame is not None:
            seq = self._seq = self._seq + 1
            self.history.append((seq, frame))
            self.history_bytes += len(frame.payload)
            while self.history_bytes > self.history_limit and len(self.history) > 1:
                self.history_bytes -= len(self.history.popleft()[1].payload)
                self.history_dropped += 1
        if frame is not None and frame.kind == KIND_STEPS:
            return  # packed steps: the most frequent frames, never header events
        keys = _KEYS
        for ev in events:
            keyer = keys.get(type(ev))
            if keyer is None:
                if type(ev) is JobExit:
                    self.exit = (ev, seq)
                continue
            key = keyer(ev)
            if key in self._slots:
                self._slots.move_to_end(key)
            elif isinstance(ev, ProcInfo):
                self._procs += 1
            elif isinstance(ev, Note):
                self._notes += 1
            self._slots[key] = (ev, None if isinstance(ev, header_only) else seq)
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

    def events(self, record_path: str | None = None, *, all_: bool = True) -> list[Event]:
        """The header events, session first (``all_=False``: only those no longer in the
        history); ``record_path`` renames the recording."""
        evs = [ev for ev, seq in self._slots.values() if all_ or not self._kept(seq)]
        evs.sort(key=lambda e: not isinstance(e, SessionStart))
        if record_path is not None:
            evs = [
                replace(e, record_path=record_path) if isinstance(e, SessionStart) else e
                for e in evs
            ]
        return evs

    def described(self) -> list[Event]:
        """Every event that describes the session, the job's exit last: what a fresh model
        needs before the live stream (a forwarder's collector after a reconnect)."""
        return self.events() + ([self.exit[0]] if self.exit is not None else [])

    def preamble(self, record_path: str | None = None) -> list[Frame]:
        """What a new subscriber receives before the live stream: header, history, exit."""
        out: list[Frame] = []
        head = self.events(record_path, all_=False)
        if head:
            out.extend(fitted_frames(head)[0])  # 2000 command lines may not fit in one
        out.extend(f for _, f in self.history)
        if self.exit is not None and not self._kept(self.exit[1]):
            out.append(_frame([self.exit[0]]))
        return out

    def _kept(self, seq: int | None) -> bool:
        """Whether the frame ``seq`` is still in the history."""
        return seq is not None and bool(self.history) and seq >= self.history[0][0]


def _frame(events: list[Event]) -> Frame:
    data = encode_frame(events)
    return Frame(KIND_JSON, data[12:])
