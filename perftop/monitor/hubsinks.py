"""The hub's event sinks: the recording written in line, the buffered viewers and
forwarders. They stand alone because a sink comes, goes and fails on its own terms: asked
for from any thread through the hub's queue, added on its thread after the header and
history, closed on its way out, cut off with one line when it fails, its drops said.
:class:`Hub <perftop.monitor.hub.Hub>` inherits this half; the thread model is the hub's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from perftop.events import Dropped, Event
from perftop.monitor.cutoff import CutOffs
from perftop.monitor.header import Header
from perftop.monitor.sinks import BufferedSink, EventSink
from perftop.recording import RecordingWriter, default_path
from perftop.replay.autosave import index_after_recording


class HubSinks:
    """The Hub's sinks half (:class:`~perftop.monitor.hub.Hub` inherits it)."""

    header: Header
    cutoffs: CutOffs
    _direct: list[EventSink]
    _buffered: list[BufferedSink]
    _sinks_dropped_before: int
    _sinks_dropped_said: int
    if TYPE_CHECKING:  # the Hub's own

        def _put(self, item: Any) -> None: ...

    # -- producers (any thread): each posts to the hub's thread ---------------------------
    def subscribe(
        self, sink: EventSink, *, buffered: bool = True, record_path: str | None = None
    ) -> BufferedSink | EventSink:
        """Add an event sink; it first receives the header and history. ``buffered=False``
        is for the recording (written in line, never dropped); ``record_path`` renames the
        recording in the header it receives. Returns the handle to pass to unsubscribe."""
        handle: Any = BufferedSink(sink) if buffered else sink
        self._put(("sub", handle, record_path))
        return handle

    def record(self, path: os.PathLike[str] | str, *, force: bool = False) -> RecordingWriter:
        """Record from now on into a new file that begins with the session's header and
        history, so it reports on its own."""
        rec = RecordingWriter(path, force=force, on_close=index_after_recording)
        self.subscribe(rec, buffered=False, record_path=str(rec.path))
        return rec

    def toggle_recording(
        self, current: RecordingWriter | None, path: os.PathLike[str] | str | None = None
    ) -> RecordingWriter | None:
        """The ``r`` key: stop ``current`` when it records, else start a new recording
        (at ``path`` or a fresh default name); returns what records now."""
        if current is not None and not current.closed:
            self.unsubscribe(current)
            return None
        return self.record(path or default_path())

    def unsubscribe(self, handle: BufferedSink | EventSink) -> None:
        """Remove a sink after everything queued before this call, then close it."""
        self._put(("unsub", handle))

    # -- on the hub's thread ------------------------------------------------------------
    def _sink_drops(self) -> tuple[Event, ...]:
        """A :class:`Dropped` (source ``viewers``) when the buffered sinks (viewers,
        forwarders) dropped more frames since the last one: no loss goes unsaid."""
        total = self._sinks_dropped_before + sum(b.dropped for b in self._buffered)
        if total == self._sinks_dropped_said:
            return ()
        self._sinks_dropped_said = total
        return (Dropped(time.time(), os.getpid(), total, "viewers"),)

    def _add(self, handle: Any, record_path: str | None) -> None:
        pre = self.header.preamble(record_path)
        if isinstance(handle, BufferedSink):
            for f in pre:
                handle.put(f, force=True)
            self._buffered.append(handle)
        else:
            self._direct.append(handle)
            for f in pre:
                if not self._guard(handle, handle.write_frame, f):
                    break

    def _remove(self, handle: Any) -> None:
        if handle in self._direct:
            self._guard(handle, handle.close)
            if handle in self._direct:
                self._direct.remove(handle)
        elif handle in self._buffered:
            self._buffered.remove(handle)
            self._sinks_dropped_before += handle.dropped
            handle.close()

    # -- a sink that fails is cut off, with one line; the session goes on -----------------
    def _guard(self, sink: Any, fn: Callable[..., object], *args: Any) -> bool:
        """``fn(*args)`` of a direct sink; False when it raised and was cut off."""
        return self.cutoffs.call(self._direct, sink, fn, *args)

    @property
    def sinks(self) -> int:
        return len(self._direct) + len(self._buffered)

    # -- leaving the job running (see lifecycle.detach): the hub's thread paused ---------
    def flush(self) -> None:
        for rec in list(self._direct):
            flush = getattr(rec, "flush", None)
            if flush is not None:
                self._guard(rec, flush)
