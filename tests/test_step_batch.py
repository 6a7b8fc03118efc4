"""A live stream's frames of packed steps reach the model whole (a ``StepBatch``, folded in
one loop): the figures, and what the hints are shown, are those of the same steps applied
one at a time, on a real recording, through the real reader and a collector's model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from perftop.events import Event, NodeScope, Step
from perftop.hints.session import hinted_session
from perftop.model.fleet import FleetSession
from perftop.model.protocol import NoHints
from perftop.model.session import Session
from perftop.model.snapshot import Hint, Snapshot
from perftop.recording import read_events
from perftop.wire import (
    HEADER,
    MAGIC,
    STEP_RECORD,
    STEP_SOURCES,
    Frame,
    StepBatch,
    encode_frame,
    encode_node_frame,
    encode_steps_frame,
    event_count,
)
from perftop.wire_stream import EventReader

RECORDING = Path(__file__).parent / "tui" / "recordings" / "stall.perftop"  # a real job's


class Seen(NoHints):
    """A hinter that remembers every snapshot it was handed, due each 0.5 s of events."""

    def __init__(self) -> None:
        self.next_t: float | None = None
        self.seen: list[Snapshot] = []

    def due(self, t: float | None) -> bool:
        if t is None:
            return False
        if self.next_t is None:
            self.next_t = t + 0.5
        return t >= self.next_t

    def update(self, snap: Snapshot) -> None:
        self.seen.append(snap)
        assert snap.meta.now_t is not None
        self.next_t = snap.meta.now_t + 0.5

    def hints(
        self, snap: Snapshot, window: int | None, whole: Callable[[], Snapshot], key: int
    ) -> tuple[Hint, ...]:
        return ()


def _packed(step: Step) -> bytes:
    src = STEP_SOURCES.index(step.source) if step.source in STEP_SOURCES else 0
    return STEP_RECORD.pack(
        step.pid, step.index, step.t0, step.t1, step.data, step.backward, step.optimizer, src
    )


def stream(events: list[Event], per_frame: int, node: str = "") -> bytes:
    """The events as a hook's sender frames them: runs of steps packed, ``per_frame`` to a
    frame, the rest as JSON; wrapped as a collector wraps a node's frames if ``node``."""
    frames: list[bytes] = []
    run: list[bytes] = []
    other: list[Event] = []

    def flush() -> None:
        if other:
            frames.append(encode_frame(other))
            other.clear()
        if run:
            frames.append(encode_steps_frame(run))
            run.clear()

    for ev in events:
        if isinstance(ev, Step) and ev.phases is None:
            if other or len(run) == per_frame:
                flush()
            run.append(_packed(ev))
        else:
            if run:
                flush()
            other.append(ev)
    flush()
    if node:
        kinds = [HEADER.unpack_from(f)[2] for f in frames]
        frames = [
            encode_node_frame(node, Frame(k, f[HEADER.size :])).encode()
            for k, f in zip(kinds, frames)
        ]
    return MAGIC + b"".join(frames)


def live(data: bytes) -> list[Event]:
    """What the live ingest applies: the real reader's events, fed in uneven pieces."""
    reader, out = EventReader(), []
    for i in range(0, len(data), 777):
        for _frame, events in reader.feed(data[i : i + 777]):
            out.extend(events)
    assert reader.rejected == 0
    return out


def recorded() -> list[Event]:
    events = list(read_events(RECORDING))
    assert sum(isinstance(e, Step) for e in events) >= 30
    return events


@pytest.mark.parametrize("per_frame", [1, 4, 64])
def test_a_batch_gives_the_figures_and_hint_inputs_of_its_steps_one_by_one(per_frame):
    events = recorded()
    one, whole = Session(hints=Seen()), Session(hints=Seen())
    one.apply_all(events)
    batched = live(stream(events, per_frame))
    assert any(isinstance(e, StepBatch) for e in batched)
    assert event_count(batched) == len(events)
    whole.apply_all(batched)
    assert whole.events == one.events == len(events) and whole.last_t == one.last_t
    for window in (None, 10, 1000):
        assert whole.snapshot(window=window) == one.snapshot(window=window)
    a, b = one.hints, whole.hints
    assert isinstance(a, Seen) and isinstance(b, Seen)
    assert len(a.seen) >= 5  # the hints fell due mid-frame: the batch was cut there
    assert b.seen == a.seen


def test_a_collectors_model_of_hinted_sessions_folds_node_batches_the_same():
    events = recorded()
    one, whole = FleetSession(hinted_session), FleetSession(hinted_session)
    for node in ("n1", "n2"):
        one.apply_all([NodeScope(node), *events, NodeScope("")])
        whole.apply_all(live(stream(events, 16, node)))
    assert whole.events == one.events == 2 * len(events)
    assert whole.snapshot(window=None) == one.snapshot(window=None)
    assert whole.snapshot() == one.snapshot()
    assert [r.host for r in whole.snapshot().ranks] == ["n1", "n2"]


def test_the_hints_look_at_the_jobs_end_however_soon_after_their_last_look():
    """The job's exit is one more look for the rules, on the state it ended in (the hints a
    run ended with left out its last steps where it ended under a look's period after the
    previous look: an epoch's restart, and the evidence that named it)."""
    events = list(read_events(RECORDING))
    (exit_t,) = [e.t for e in events if type(e).__name__ == "JobExit"]
    steps = [e for e in events if isinstance(e, Step)]
    # every step ended before the exit: the last look must see them all
    assert max(s.t1 for s in steps) < exit_t
    hinter = Seen()
    session = Session(hints=hinter)
    session.apply_all(events)
    last = hinter.seen[-1]
    assert last.meta.ended and last.meta.now_t == session.last_t
    assert last.steps.count == len(steps)


def test_frames_longer_than_the_recent_rows_give_the_same_figures_and_rows():
    """A tight loop's frame holds more steps than the rows kept for the charts (only the
    last rows are made): the rows, their gap marks and every figure are those of the
    steps one at a time, also where two processes' records share a frame."""
    from perftop.events import Between, Hello, SessionStart
    from perftop.model.steps import RECENT_ROWS

    t0, ns, events = 1_790_000_000.0, 0, []
    events.append(SessionStart(t0, ("python", "fast.py"), "/w", "n1", 1, "0.1.0"))
    for pid in (11, 12):
        events.append(Hello(t0, pid, 1, "n1", ("fast.py",), pid - 11, 0, 2, "2.13.0", "cpu"))
    for i in range(3 * RECENT_ROWS + 17):
        for pid in (11, 12):
            a = t0 + ns / 1e9
            ns += 200_000 + (i * 7919 + pid) % 9000
            events.append(Step(pid, i, a, t0 + ns / 1e9, 0.0, 7e-5, 2e-5, None, "backward"))
        if i in (100, 2 * RECENT_ROWS + 100):  # evaluations: the next step's row says so
            events.append(Between(11, "eval", t0 + ns / 1e9, 0.02, "", 0.015))
            ns += 20_000_000
    one, whole = Session(hints=Seen()), Session(hints=Seen())
    batched = live(stream(events, 2 * RECENT_ROWS + 60))
    assert max(e.count for e in batched if isinstance(e, StepBatch)) > RECENT_ROWS
    ahead = iter(events)
    for ev in batched:  # the same after each frame
        whole.apply(ev)
        one.apply_all([next(ahead) for _ in range(event_count([ev]))])
        for window in (None, 10, 1000):
            assert whole.snapshot(window=window) == one.snapshot(window=window)
    assert next(ahead, None) is None
    assert any(r.gap_before == "eval" for r in one.snapshot().steps.recent)


@pytest.mark.parametrize("damage", [False, True])
def test_a_report_reads_in_batches_to_the_same_figures_and_the_same_losses(tmp_path, damage):
    """``perftop report`` folds a recording's step frames whole (twice as fast on a tight
    loop's million steps): the figures, and what the reader says it lost to damage, are
    those of the steps read one at a time."""
    from perftop.reader import ReadStats
    from perftop.report.build import session_from_file

    data = bytearray(RECORDING.read_bytes())
    if damage:
        for at in (len(data) // 3, len(data) // 2):
            data[at] ^= 0x55
    p = tmp_path / "r.perftop"
    p.write_bytes(bytes(data))
    one, st_one, st_whole = FleetSession(hinted_session), ReadStats(), ReadStats()
    one.apply_all(read_events(p, st_one))
    whole = session_from_file(str(p), st_whole)
    assert st_whole == st_one
    assert whole.snapshot(window=None) == (one if one.nodes else one.local).snapshot(window=None)
    assert damage == bool(st_one.warnings)
