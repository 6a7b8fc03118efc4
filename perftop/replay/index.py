"""The replay index: read from its saved sidecar (:mod:`perftop.replay.saved`), else built
once by a background thread (and then saved), read by seeks.

One pass over the recording applies every event to a session of its own and keeps, every
``CHECKPOINT_EVERY`` events, a model checkpoint (with where reading can resume before it,
and how many events to pass over from there). On
the way it notes what the timeline and the jump keys need: where the session starts and
ends, the stalls of the primary process (a step at least ``STALL_FACTOR`` times the median
of its last ``WINDOW`` steps, the Steps panel's rule), the gaps between its steps, and the
checkpoints where the hints or the between-steps figures changed.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from pathlib import Path

from perftop.events import Note, SessionStart, Step
from perftop.hints.session import SessionHints
from perftop.model import Session
from perftop.model.fleet import FleetSession
from perftop.model.job_reducers import StepsReducer
from perftop.model.stats import percentile
from perftop.reader import FrameScanner, open_recording
from perftop.recording import ReadStats, finish_stats
from perftop.replay import saved
from perftop.replay.checkpoint import Checkpoint
from perftop.wire import MAGIC

CHECKPOINT_EVERY = 400  # events; a seek replays at most about this many
STALL_FACTOR = 3.0
WINDOW = 1000  # steps in the median a stall is measured against (the live window)
MEDIAN_EVERY = 256  # steps between two refreshes of that median
GAP_MIN_S = 0.1  # a gap between steps shorter than this is not a between-steps interval


def steps_reducer(session: Session | FleetSession) -> StepsReducer | None:
    return next((r for r in session.reducers if isinstance(r, StepsReducer)), None)


def primary_pid(session: Session | FleetSession) -> int | None:
    """The process the Steps panel shows (``StepsReducer.primary_pid``)."""
    steps = steps_reducer(session)
    return steps.primary_pid() if steps is not None else None


class ReplayIndex:
    """Checkpoints and timeline marks of one recording; ``done`` once the pass ended."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.stats = ReadStats()
        self.checkpoints: list[Checkpoint] = []
        # Each mark ends with the event count where it is shown (``Player.seek_event``):
        # event time cannot place it, a file holds events slightly out of time order.
        # (t1, step number, events, seconds beyond the median)
        self.stalls: list[tuple[float, int, int, float]] = []
        self.gaps: list[tuple[float, float, int]] = []  # (a step's end, the next's start, …)
        self.hint_changes: list[tuple[float, int]] = []  # hints changed, or a note arrived
        self.between_marks: list[tuple[float, int]] = []  # an interval outside steps began
        self.start_t: float | None = None
        self.end_t: float | None = None
        self.events = 0
        self.steps = 0  # of the primary process
        self.primary: int | None = None  # the process whose steps are counted
        self.progress = 0.0
        self.done = False
        self.error: str | None = None
        self.loaded = False  # read from the saved index
        self.saved_to: Path | None = None  # where the built index was saved
        self._thread: threading.Thread | None = None

    def start(self) -> ReplayIndex:
        """Read the saved index, or build it in the background (and save it)."""
        if saved.load(self):
            return self
        self._thread = threading.Thread(target=self._run, name="perftop-index", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.done

    def _run(self) -> None:
        try:
            self.build()
            self.saved_to = saved.save(self)
        except Exception as exc:  # shown by the app as a notice, never a traceback
            self.error = f"{type(exc).__name__}: {exc}"
            self.done = True

    def build(self) -> None:
        p, f, size = open_recording(self.path)
        hints = SessionHints()
        session, last_cp = Session(hints=hints), -CHECKPOINT_EVERY
        seg_offset, seg_events = len(MAGIC), 0  # where reading last could resume
        sr = steps_reducer(session)
        primary: int | None = None
        npids, prev_t1, prev_at, p50 = 0, None, 0, None
        engine_t = hints.next_t  # each hint raised or dropped, exactly
        shown: tuple[str, ...] = ()
        with f:
            for chunk in FrameScanner(p, f, size, self.stats).chunks():
                if chunk.resumable:
                    seg_offset, seg_events = chunk.offset, session.events
                if session.events - last_cp >= CHECKPOINT_EVERY:
                    self._checkpoint(session, seg_offset, session.events - seg_events)
                    last_cp = session.events
                for ev in chunk.events:
                    session.apply(ev)
                    if hints.next_t != engine_t:  # the engine evaluated: compare
                        engine_t = hints.next_t
                        now = tuple(sorted(h.id for h in hints.active()))
                        if now != shown:
                            shown = now
                            self.hint_changes.append((session.last_t or 0.0, session.events))
                    if type(ev) is Step:
                        series = sr.series  # type: ignore[union-attr]
                        if len(series) != npids:
                            npids, primary = len(series), primary_pid(session)
                            self.primary = primary
                        if ev.pid != primary:
                            continue
                        s = series[primary]
                        n = s.count
                        if n <= MEDIAN_EVERY or n % MEDIAN_EVERY == 0:
                            p50 = percentile(sorted(s.window(WINDOW)[0]), 50)
                        if p50 and n > 1 and ev.t1 - ev.t0 >= STALL_FACTOR * p50:
                            slow = (ev.t1, n, session.events, ev.t1 - ev.t0 - p50)
                            self.stalls.append(slow)
                        gap_min = max(GAP_MIN_S, 3 * p50) if p50 else GAP_MIN_S
                        if prev_t1 is not None and ev.t0 - prev_t1 >= gap_min:
                            self.gaps.append((prev_t1, ev.t0, prev_at))
                        prev_t1, prev_at, self.steps = ev.t1, session.events, n
                    elif isinstance(ev, Note) and ev.source != "background":
                        self.hint_changes.append((ev.t, session.events))
                    elif isinstance(ev, SessionStart) and self.start_t is None:
                        self.start_t = ev.t
                self.events = session.events
                self.end_t = session.last_t
                self.progress = chunk.end / size if size else 1.0
        if self.start_t is None and self.checkpoints:
            self.start_t = self.checkpoints[0].last_t
        if tuple(sorted(h.id for h in session.snapshot().hints)) != shown:
            # the job ended: the whole-run verdict joins the live hints
            self.hint_changes.append((session.last_t or 0.0, session.events))
        self.hint_changes.sort()
        finish_stats(p, self.stats)
        self.progress, self.done = 1.0, True

    def _checkpoint(self, session: Session, offset: int, skip: int) -> None:
        cp = Checkpoint.take(session, offset, skip)
        snap = session.snapshot()
        cp.hints = tuple(sorted(h.id for h in snap.hints))
        cp.between = tuple((b.kind, b.count) for b in snap.between)
        if self.checkpoints:
            before = self.checkpoints[-1]
            if cp.between != before.between:
                done = dict(before.between)
                self.between_marks += [
                    (b.last_t0, cp.events)
                    for b in snap.between
                    if b.count > done.get(b.kind, 0) and b.last_t0 is not None
                ]
        self.checkpoints.append(cp)

    # -- lookups ---------------------------------------------------------------------------
    def before_event(self, n: int) -> Checkpoint | None:
        keys = [c.events for c in self.checkpoints]
        i = bisect_right(keys, n) - 1
        return self.checkpoints[i] if i >= 0 else None

    def before_time(self, t: float) -> Checkpoint | None:
        best = None
        for c in self.checkpoints:  # last_t grows with events; stop at the first beyond
            if c.last_t is not None and c.last_t > t:
                break
            best = c
        return best

    def before_step(self, pid: int, n: int) -> Checkpoint | None:
        best = None
        for c in self.checkpoints:
            if c.steps.get(pid, 0) > n:
                break
            best = c
        return best

    def next_stall(self, t: float) -> tuple[float, int] | None:
        """(time, events) of the first stall after ``t``."""
        i = bisect_right(self.stalls, (t, float("inf")))
        return (self.stalls[i][0], self.stalls[i][2]) if i < len(self.stalls) else None

    def next_between(self, t: float) -> tuple[float, int] | None:
        """Where the next interval outside training steps begins: the between-steps
        figures' own intervals (``Snapshot.between``) and the primary's gaps between steps."""
        marks = [m for m in self.between_marks if m[0] > t]
        i = bisect_right(self.gaps, (t, float("inf")))
        if i < len(self.gaps):
            marks.append((self.gaps[i][0], self.gaps[i][2]))
        return min(marks) if marks else None

    def next_hint_change(self, t: float) -> tuple[float, int] | None:
        i = bisect_right(self.hint_changes, (t, float("inf")))
        return self.hint_changes[i] if i < len(self.hint_changes) else None

    def warnings(self) -> list[str]:
        return list(self.stats.warnings)
