"""The ingest loop: every source (sockets, probes, the job's output, the runner) feeds one
queue; one thread records each event and applies it to the session, in arrival order.

Snapshots are made on this thread at the refresh rate and handed to ``on_snapshot``, so a
slow UI can never hold up ingest or recording: it only ever sees the latest snapshot.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import psutil

from perftop.events import Event, MonitorStats
from perftop.model import Session, Snapshot
from perftop.recording import RecordingWriter
from perftop.wire import Frame

SnapshotSink = Callable[[Snapshot], None]


class EventSink(Protocol):
    """A subscriber of the stream: what :class:`RecordingWriter` offers (a forwarder is
    one too). It must never raise nor block for long: it runs on the ingest thread."""

    def write_frame(self, frame: Frame) -> None: ...

    def write_events(self, events: Iterable[Event]) -> None: ...

    def tick(self, now: float | None = None) -> None: ...

    def close(self) -> None: ...


class Ingest:
    def __init__(
        self,
        session: Session | Any,
        recorder: RecordingWriter | None = None,
        *,
        on_snapshot: SnapshotSink | None = None,
        refresh_s: float = 0.5,
        rejected_frames: Callable[[], int] = lambda: 0,
        sinks: Sequence[EventSink] = (),
    ) -> None:
        """``session`` is a :class:`Session` or anything with its ``apply`` and
        ``snapshot`` (a collector's fleet session); ``sinks`` get every event after the
        recorder (forwarders)."""
        self.session = session
        self.sinks = list(sinks)
        self.recorder = recorder
        self.on_snapshot = on_snapshot
        self.refresh_s = refresh_s
        self._rejected = rejected_frames
        self._q: queue.SimpleQueue[tuple[Frame | None, Iterable[Event]] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # guards recorder swaps (toggle recording)
        self.events_in = 0

    # -- producers (any thread) ----------------------------------------------------------
    def submit_frame(self, payload: Frame, events: list[Event]) -> None:
        self._q.put((payload, events))

    def submit(self, *events: Event) -> None:
        self._q.put((None, events))

    # -- the loop ------------------------------------------------------------------------
    def start(self) -> Ingest:
        self._thread = threading.Thread(target=self._loop, name="perftop-ingest", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        next_snap = time.monotonic()
        next_stats = time.monotonic() + 1.0
        cpu0, wall0 = time.process_time(), time.monotonic()
        while True:
            try:
                item = self._q.get(timeout=0.05)
            except queue.Empty:
                item = ()
            if item is None:
                break
            if item:
                self._handle(item)
                # Drain what else is waiting before doing periodic work.
                while True:
                    try:
                        more = self._q.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        self._finish()
                        return
                    self._handle(more)
            now = time.monotonic()
            if now >= next_stats:
                cpu1 = time.process_time()
                pct = 100.0 * (cpu1 - cpu0) / max(now - wall0, 1e-6)
                cpu0, wall0, next_stats = cpu1, now, now + 1.0
                self._handle(
                    (
                        None,
                        (
                            MonitorStats(
                                time.time(), round(pct, 1), _rss(), self._rejected(), self.events_in
                            ),
                        ),
                    )
                )
            with self._lock:
                if self.recorder is not None:
                    self.recorder.tick(now)
            for sink in self.sinks:
                sink.tick(now)
            if self.on_snapshot is not None and now >= next_snap:
                next_snap = now + self.refresh_s
                self.on_snapshot(self.session.snapshot(now=time.time()))
        self._finish()

    def _handle(self, item: tuple[Frame | None, Iterable[Event]]) -> None:
        payload, events = item
        with self._lock:
            rec = self.recorder
            if rec is not None:
                if payload is not None:
                    rec.write_frame(payload)
                else:
                    rec.write_events(events)
        for sink in self.sinks:
            if payload is not None:
                sink.write_frame(payload)
            else:
                sink.write_events(events)
        apply = self.session.apply
        n = 0
        for ev in events:
            apply(ev)
            n += 1
        self.events_in += n

    def _finish(self) -> None:
        with self._lock:
            if self.recorder is not None:
                self.recorder.close()
        for sink in self.sinks:
            sink.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Apply and record everything queued, then close the recording."""
        self._q.put(None)
        if self._thread is not None:
            self._thread.join(timeout)

    # -- recording control (UI thread) ---------------------------------------------------
    def set_recorder(self, recorder: RecordingWriter | None) -> RecordingWriter | None:
        with self._lock:
            old, self.recorder = self.recorder, recorder
        return old


def _rss() -> int:
    """perftop's own resident memory, from psutil (any OS)."""
    try:
        return psutil.Process().memory_info().rss
    except psutil.Error:
        return 0
