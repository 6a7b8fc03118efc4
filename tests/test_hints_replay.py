"""A replay of a recording raises the same hints at the same moments as the live session:
the engine runs on event time inside the model, so the live monitor, a straight replay and
a seeking player all agree."""

from __future__ import annotations

from pathlib import Path

from perftop.hints import hinted_session
from perftop.model import Session
from perftop.recording import read_events
from perftop.replay.index import ReplayIndex
from perftop.replay.player import Player
from tests.replay_recordings import Run


def straight(path: Path) -> Session:
    s = hinted_session()
    s.apply_all(read_events(path))
    return s


def moments(s: Session) -> list[tuple[str, float | None, float | None]]:
    return [(h.id, h.since_t, h.until_t) for h in s.snapshot(window=None).hints if h.seen_live]


def test_replay_gives_the_live_hints_at_the_same_moments(starved_loader_run: Run) -> None:
    # `perftop run --headless --record` of `loader_train.py 320`, run once for the session
    rec, live = starved_loader_run.rec, starved_loader_run.proc
    assert live.returncode == 0, live.stderr
    # the live monitor's own session printed its whole-run hints as the job ended
    shown = [ln for ln in live.stderr.splitlines() if ln.startswith("perftop: hint [")]
    assert shown, live.stderr

    replay = straight(rec)
    snap = replay.snapshot(window=None)
    assert [
        f"perftop: hint [{h.severity}] {h.title}" + ("" if h.seen_live else " (whole-run verdict)")
        for h in snap.hints
    ] == shown
    assert snap.hints[0].id == "input-bound" and snap.hints[0].since_t is not None
    assert moments(straight(rec)) == moments(replay)  # deterministic

    # the hints as a straight replay had them after each event
    s, seen = hinted_session(), []
    for ev in read_events(rec):
        s.apply(ev)
        seen.append((s.snapshot().hints, moments(s)))
    first = next(k for k, (_, m) in enumerate(seen) if m)
    # each hint keeps the moment it was first raised (raised once, never re-dated); the
    # first raised need not be the first shown at the end (on a host loaded by other jobs,
    # cpu-contention came a second before input-bound)
    for hid, since, _until in moments(replay):
        k = next(k for k, (_, m) in enumerate(seen) if any(x[0] == hid for x in m))
        assert next(x[1] for x in seen[k][1] if x[0] == hid) == since, hid

    ix = ReplayIndex(rec)
    ix.build()
    p = Player(ix)
    total = ix.events
    assert total == len(seen)
    before = max(0, first - 5)
    for k in (total - 1, first, before, (first + total) // 2, total - 2, first + 1):
        p.seek_event(k + 1)  # k + 1 events applied: as ``seen[k]``
        assert p.snapshot().hints == seen[k][0], k  # shown now
        assert moments(p.session) == seen[k][1], k  # shown so far
    assert not seen[before][1]

    # `h` from the start (notes count as changes too) lands where the first hint shows
    t, marks = ix.start_t or 0.0, []
    while (mark := ix.next_hint_change(t)) is not None:
        t = mark[0]
        marks.append(mark[1])
    shows = next(k for k, (hints, _) in enumerate(seen) if hints) + 1  # events applied
    assert shows in marks, (shows, marks)
