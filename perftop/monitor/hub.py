"""The monitor's hub: one stream in, many subscribers out.

Every source (hook sockets, probes, the job's output, the lifecycle, stack capture) feeds
one bounded queue; one thread takes each item in arrival order, writes it to the event
sinks (the recording, viewers, forwarders), keeps the session's header and a bounded
history, and applies it to the session model. Snapshot subscribers (the TUI, metrics, stall
capture) get a snapshot at the refresh rate on this thread and must return quickly. The
thread takes what is queued in rounds: a hook's frame waits for the next one (TICK_S at
most, and every snapshot's), so that ten frames a second do not cost ten wake-ups.

Bounded: frames from the hooks beyond ``max_frames`` / ``max_bytes`` queued are dropped and
counted (shown in the header beside the hooks' own drops); the monitor's own events (a
few a second) and subscriptions are never dropped. A sink subscribed mid-run first gets
the header and history, through the same queue, so it misses nothing and sees nothing twice.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import psutil

from perftop.events import Dropped, Event, JobStart, MonitorStats, ObserverStart, SessionStart
from perftop.hints.session import hinted_session
from perftop.model import SessionModel, Snapshot
from perftop.monitor.capture import CaptureDesk, CaptureWatch
from perftop.monitor.cutoff import CutOffs
from perftop.monitor.header import Header
from perftop.monitor.sinks import BufferedSink, EventSink
from perftop.recording import RecordingWriter, default_path
from perftop.replay.autosave import index_after_recording
from perftop.wire import Frame, event_count, fitted_frames

SnapshotSink = Callable[[Snapshot], object]
MAX_FRAMES = 4096
MAX_BYTES = 64 * 1024 * 1024
# The loop's longest sleep with nothing queued: in-line sinks tick at least this often (a
# recording flushes every 0.5 s, recording.FLUSH_EVERY_S). It woke every 50 ms: 20 wake-ups
# a second with nothing to do cost an idle headless monitor ~0.1% of a core.
TICK_S = 0.25
# A hook's frame does not wake the hub: it waits for the hub's next round (TICK_S at most;
# a snapshot takes what is queued first), unless 1/WAKE_AT of either bound is queued (a
# burst: 256 frames or 4 MiB) or someone waits for a capture's answer (Hub.hurry). Waking
# the hub for each frame cost a thread wake-up (~0.1 ms of CPU on a VM) per frame, and the
# sinks' threads woke with it.
WAKE_AT = 16
_HEADER_ONLY = (SessionStart, JobStart, ObserverStart)  # kept in the header, not the history


class Hub:
    def __init__(
        self,
        session: SessionModel | None = None,
        *,
        refresh_s: float = 0.5,
        rejected_frames: Callable[[], int] = lambda: 0,
        max_frames: int = MAX_FRAMES,
        max_bytes: int = MAX_BYTES,
        header: Header | None = None,
        on_problem: Callable[[str], object] | None = None,
    ) -> None:
        self.session: SessionModel = session if session is not None else hinted_session()
        self.header = header if header is not None else Header()
        self.refresh_s = refresh_s
        self._rejected = rejected_frames
        self.max_frames, self.max_bytes = max_frames, max_bytes
        self._q: deque[Any] = deque()
        self._queued_frames = 0
        self._queued_bytes = 0
        self._cv = threading.Condition()
        self._direct: list[EventSink] = []  # the recording: written in line, never dropped
        self._buffered: list[BufferedSink] = []
        self.snapshot_subscribers: list[SnapshotSink] = []
        self._thread: threading.Thread | None = None
        self.events_in = 0
        self.hook_events_in = 0  # the part of events_in that came through submit_frame
        self.dropped_events = 0  # hook events the bounded queue had to drop
        self.dropped_frames = 0
        self.model_errors = 0  # events (and snapshots) the session model raised on
        self._sinks_dropped_before = 0  # frames the buffered sinks since let go had dropped
        self._sinks_dropped_said = 0
        self.latest: Snapshot | None = None  # read by the socket's info requests
        self.captures = CaptureDesk(self.submit)
        self.cutoffs = CutOffs(
            lambda note: self.submit(note),
            on_problem,
            self._steps_now,
        )

    # -- producers (any thread) ----------------------------------------------------------
    def submit_frame(self, frame: Frame, events: list[Event]) -> bool:
        """A hook's frame; dropped and counted when the queue is full."""
        with self._cv:
            if (
                self._queued_frames >= self.max_frames
                or self._queued_bytes + len(frame.payload) > self.max_bytes
            ):
                self.dropped_frames += 1
                self.dropped_events += event_count(events)
                return False
            self._queued_frames += 1
            self._queued_bytes += len(frame.payload)
            self._q.append((frame, events))
            if (
                self.hurry()
                or self._queued_frames * WAKE_AT >= self.max_frames
                or self._queued_bytes * WAKE_AT >= self.max_bytes
            ):
                self._cv.notify()
        return True

    def hurry(self) -> bool:
        """Whether someone waits for the hooks' answers now (a capture's: `perftop trace`,
        the TUI's capture line): their frames are then read and handled at once."""
        return bool(self.captures.watch)

    def submit(self, *events: Event) -> None:
        """The monitor's own events (probes, output, lifecycle): few, never dropped."""
        self._put((None, events))

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

    def capture(self, steps: int, by: str = "", on_event: CaptureWatch | None = None) -> Any:
        """Ask the training processes for an op capture: (its id, the pids asked; none:
        refused at once). See monitor/capture.py."""
        rec = next((r for r in self._direct if isinstance(r, RecordingWriter)), None)
        return self.captures.ask(steps, by, on_event, str(rec.path) if rec else "")

    def fresh(self, timeout: float = 1.0) -> Snapshot | None:
        """A snapshot taken now on the hub's thread (``perftop ls``: the last one may be a
        refresh old, a second headless, while a fast job ran 100 steps); the last one when
        the hub does not answer within ``timeout`` (stopped, or behind a burst)."""
        done = threading.Event()
        self._put(("snap", done))
        done.wait(timeout)
        return self.latest

    def _put(self, item: Any) -> None:
        with self._cv:
            self._q.append(item)
            self._cv.notify()

    # -- the loop ------------------------------------------------------------------------
    def start(self) -> Hub:
        self._thread = threading.Thread(target=self._loop, name="perftop-hub", daemon=True)
        self._thread.start()
        return self

    def _take(self, timeout: float) -> list[Any]:
        with self._cv:
            if not self._q:
                self._cv.wait(timeout)
            items = list(self._q)
            self._q.clear()
            self._queued_frames = self._queued_bytes = 0
        return items

    def _loop(self) -> None:
        next_snap = time.monotonic()
        next_stats = time.monotonic() + 1.0
        cpu0, wall0 = time.process_time(), time.monotonic()
        while True:
            # asleep until an item comes or the next snapshot, stats line or sink tick is
            # due (a recording's flush, a capture's deadline: TICK_S at most)
            wait = min(next_snap, next_stats) - time.monotonic()
            for item in self._take(min(max(wait, 0.0), TICK_S)):
                if item is None:
                    self._finish()
                    return
                if item == "pause":
                    return
                self._handle(item)
            now = time.monotonic()
            if now >= next_stats:
                cpu1 = time.process_time()
                pct = 100.0 * (cpu1 - cpu0) / max(now - wall0, 1e-6)
                cpu0, wall0, next_stats = cpu1, now, now + 1.0
                stats = MonitorStats(
                    time.time(),
                    round(pct, 1),
                    _rss(),
                    self._rejected(),
                    self.events_in,
                    self.dropped_events,
                )
                self._handle((None, (stats, *self._sink_drops())))
            for rec in list(self._direct):
                self._guard(rec, rec.tick, now)
            self.cutoffs.let_go(self._buffered)
            for b in self._buffered:
                b.kick()  # once a round, for all it was given
            if now >= next_snap:
                next_snap = now + self.refresh_s
                self._snapshot()

    def _sink_drops(self) -> tuple[Event, ...]:
        """A :class:`Dropped` (source ``viewers``) when the buffered sinks (viewers,
        forwarders) dropped more frames since the last one: no loss goes unsaid."""
        total = self._sinks_dropped_before + sum(b.dropped for b in self._buffered)
        if total == self._sinks_dropped_said:
            return ()
        self._sinks_dropped_said = total
        return (Dropped(time.time(), os.getpid(), total, "viewers"),)

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

    def _handle(self, item: Any) -> None:
        head = item[0]
        if head == "snap":  # for the asker only: no subscriber's refresh is due
            self.latest = self._take_snapshot() or self.latest
            item[1].set()
            return
        if head == "sub":
            self._add(item[1], item[2])
            return
        if head == "unsub":
            self._remove(item[1])
            return
        frame, events = item
        n = event_count(events)
        if frame is None:  # the monitor's own: in frames its readers take (see fitted_frames)
            hist = [e for e in events if not isinstance(e, _HEADER_ONLY)]
            frames, left_out = fitted_frames(events)
            hist_frames = frames if len(hist) == len(events) else fitted_frames(hist)[0]
            self.dropped_events += left_out
        else:
            frames = hist_frames = [frame]
            self.hook_events_in += n
        for f in frames:
            for rec in list(self._direct):
                self._guard(rec, rec.write_frame, f)
            for b in self._buffered:
                b.put(f)
        for f in hist_frames[:-1]:
            self.header.add(f, ())
        self.header.add(hist_frames[-1] if hist_frames else None, events, _HEADER_ONLY)
        apply = self.session.apply
        for ev in events:
            try:
                apply(ev)
            except Exception as exc:  # a model bug must not stop ingest or the recording
                self._model_failed(f"a {type(ev).__name__} event", exc)
        if self.captures.watch:
            self.captures.tell(events)
        self.events_in += n

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

    def _finish(self) -> None:
        self._snapshot()
        for rec in list(self._direct):
            self._guard(rec, rec.close)
        for b in self._buffered:
            b.close()
        self._direct, self._buffered = [], []

    # -- a sink that fails is cut off, with one line; the session goes on -----------------
    def _guard(self, sink: Any, fn: Callable[..., object], *args: Any) -> bool:
        """``fn(*args)`` of a direct sink; False when it raised and was cut off."""
        return self.cutoffs.call(self._direct, sink, fn, *args)

    def stop(self, timeout: float = 5.0) -> None:
        """Apply and deliver everything queued, then close every sink."""
        self._put(None)
        if self._thread is not None:
            self._thread.join(timeout)

    # -- leaving the job running (see lifecycle.detach) ----------------------------------
    def pause(self, timeout: float = 5.0) -> None:
        """Handle what is queued, then stop the thread (and the sinks' threads) without
        closing anything, so the process can fork."""
        self._put("pause")
        if self._thread is not None:
            self._thread.join(timeout)
        for b in self._buffered:
            b.pause()

    def flush(self) -> None:
        for rec in list(self._direct):
            flush = getattr(rec, "flush", None)
            if flush is not None:
                self._guard(rec, flush)

    def resume(self) -> None:
        for b in self._buffered:
            b.start()
        self.start()

    @property
    def sinks(self) -> int:
        return len(self._direct) + len(self._buffered)

    def queued(self) -> int:
        return self._queued_frames


def _rss() -> int:
    """perftop's own resident memory, from psutil (any OS)."""
    try:
        return psutil.Process().memory_info().rss
    except psutil.Error:
        return 0
