"""A subscriber of the hub that adds the session's step and phase tracks to each capture's
trace as soon as the capture's summary (``CaptureOps``) arrives, so the file beside the
recording opens in Perfetto with the steps on the ops' clock.

It runs on a buffered sink's own thread (rewriting a trace never holds up ingest) and
fails open: a trace it cannot rewrite is one note in the session, and the next goes on.
Frames are decoded only while a capture may need their steps (from its first state event
until :data:`AFTER_S` after its last, and while a summary waits for its steps); else only
a frame that names a capture event is (a byte search): the rest of a run costs it no
decoding.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable

from perftop.events import CaptureOps, CaptureState, Event, Note, Step
from perftop.export.capture_trace import TraceError, annotate
from perftop.monitor.hub import Hub
from perftop.wire import Frame, decode_frame

RECENT_STEPS = 512  # steps kept per process, to find a capture's
WAIT_S = 5.0  # how long a summary waits for the last of its steps to arrive
AFTER_S = 30.0  # steps are kept this long after a capture's last state event
CAPTURE_TAG = b"capture_"  # in the JSON of every capture event (capture_state, capture_ops)
ENDED = ("done", "refused", "failed")


class CaptureTraces:
    """An event sink (see :mod:`perftop.monitor.sinks`). ``say`` gets the one line of a
    trace it could not rewrite."""

    def __init__(self, say: Callable[[str], object]) -> None:
        self.say = say
        self.steps: dict[int, deque[Step]] = {}
        self.pending: list[tuple[float, CaptureOps]] = []
        self.annotated: list[str] = []  # the traces rewritten, in order
        self.running: set[tuple[int, str]] = set()  # (pid, capture id) started, not ended
        self.until = 0.0  # steps are kept until then (monotonic)
        self.seen_until = 0.0  # frames pass wants() until then (monotonic; the hub's own)

    def watching(self) -> bool:
        """Whether a capture may need the steps now arriving."""
        return bool(self.running or self.pending) or time.monotonic() < self.until

    def wants(self, frame: Frame) -> bool:
        """On the hub's thread: whether to queue ``frame`` at all. It reads no state this
        sink's thread writes but :meth:`watching`, which may lag by the queue: a frame that
        names a capture event opens :data:`AFTER_S` of frames on its own, which the sink's
        thread has long taken in (its state then says) by the time that runs out."""
        now = time.monotonic()
        if CAPTURE_TAG in frame.payload:
            self.seen_until = now + AFTER_S
            return True
        return now < self.seen_until or self.watching()

    def idle_s(self) -> float | None:
        """A summary waiting for its steps is looked at twice a second; else nothing is
        to be done until a frame comes."""
        return 0.5 if self.pending else None

    def write_frame(self, frame: Frame) -> None:
        if not self.watching() and CAPTURE_TAG not in frame.payload:
            return  # no capture in sight: its steps are of no use (nor decoded)
        events, _unknown = decode_frame(frame)
        self.write_events(events)

    def write_events(self, events: Iterable[Event]) -> None:
        for ev in events:
            if isinstance(ev, Step):
                q = self.steps.get(ev.pid)
                if q is None:
                    q = self.steps[ev.pid] = deque(maxlen=RECENT_STEPS)
                q.append(ev)
            elif isinstance(ev, CaptureState):
                self.until = time.monotonic() + AFTER_S
                key = (ev.pid, ev.capture_id)
                if ev.state == "started":
                    self.running.add(key)
                elif ev.state in ENDED:
                    self.running.discard(key)
            elif isinstance(ev, CaptureOps) and ev.trace:
                self.pending.append((time.monotonic() + WAIT_S, ev))
        self.tick(time.monotonic())

    def tick(self, now: float) -> None:
        keep = []
        for deadline, ev in self.pending:
            steps = self.steps_of(ev)
            if len(steps) >= ev.steps or now >= deadline:
                self._annotate(ev, steps)
            else:
                keep.append((deadline, ev))
        self.pending = keep

    def steps_of(self, ev: CaptureOps) -> list[Step]:
        last = ev.first_step + ev.steps - 1
        got = {s.index: s for s in self.steps.get(ev.pid, ()) if ev.first_step <= s.index <= last}
        return [got[i] for i in sorted(got)]

    def _annotate(self, ev: CaptureOps, steps: list[Step]) -> None:
        try:
            annotate(ev.trace, steps, ev.clock_offset_us)
            self.annotated.append(ev.trace)
        except (TraceError, OSError) as exc:
            self.say(f"capture {ev.capture_id}: steps not added to its trace: {exc}")

    def close(self) -> None:
        for _deadline, ev in self.pending:  # the session ends: add what arrived
            self._annotate(ev, self.steps_of(ev))
        self.pending = []


def follow_captures(hub: Hub) -> CaptureTraces:
    """Subscribe a :class:`CaptureTraces` to ``hub``; its lines become notes of the session."""
    sink = CaptureTraces(lambda text: hub.submit(Note(time.time(), "warning", "capture", text)))
    hub.subscribe(sink)
    return sink
