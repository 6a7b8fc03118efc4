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

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import psutil

from perftop.events import Event, JobStart, MonitorStats, ObserverStart, SessionStart
from perftop.hints.session import hinted_session
from perftop.model import SessionModel, Snapshot
from perftop.monitor.capture import CaptureDesk, CaptureWatch
from perftop.monitor.cutoff import CutOffs
from perftop.monitor.header import Header
from perftop.monitor.hubmodel import HubModel, SnapshotSink
from perftop.monitor.hubsinks import HubSinks
from perftop.monitor.sinks import BufferedSink, EventSink
from perftop.recording import RecordingWriter
from perftop.wire import Frame, event_count, fitted_frames

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


class Hub(HubSinks, HubModel):
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

    def _finish(self) -> None:
        self._snapshot()
        for rec in list(self._direct):
            self._guard(rec, rec.close)
        for b in self._buffered:
            b.close()
        self._direct, self._buffered = [], []

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

    def resume(self) -> None:
        for b in self._buffered:
            b.start()
        self.start()

    def queued(self) -> int:
        return self._queued_frames


def _rss() -> int:
    """perftop's own resident memory, from psutil (any OS)."""
    try:
        return psutil.Process().memory_info().rss
    except psutil.Error:
        return 0
