"""The replay's index and player: a seek lands exactly where a straight replay would."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from perftop.hints import hinted_session
from perftop.model import Session
from perftop.recording import read_events
from perftop.replay.index import ReplayIndex
from perftop.replay.player import Player, event_time
from tests.helpers import replay_bench


@pytest.fixture(scope="module")
def long_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8,000 steps with samples, stalls and an evaluation pause: many checkpoints."""
    path = tmp_path_factory.mktemp("long") / "long.perftop"
    replay_bench().generate(path, 8000, 4, 0.05, eval_every=3000)
    return path


def straight(path: Path, k: int) -> Session:
    s = hinted_session()  # what the player replays into
    for i, ev in enumerate(read_events(path)):
        if i == k:
            break
        s.apply(ev)
    return s


def test_seeks_equal_a_straight_replay(long_recording: Path) -> None:
    ix = ReplayIndex(long_recording)
    ix.build()
    assert ix.done and len(ix.checkpoints) > 5 and ix.steps == 8000
    p = Player(ix)
    rnd = random.Random(0)
    total = ix.events
    for k in [total - 1, 1, *(rnd.randrange(total) for _ in range(6))]:
        p.seek_event(k)
        assert p.events == k
        assert p.snapshot() == straight(long_recording, k).snapshot()
    p.seek_event(ix.events - 1)
    p.seek_event(ix.events - 2)  # one event back
    assert p.snapshot() == straight(long_recording, ix.events - 2).snapshot()


def test_seek_by_step_and_time(long_recording: Path) -> None:
    ix = ReplayIndex(long_recording)
    ix.build()
    p = Player(ix)
    p.seek_step(5000)
    assert p.steps() == 5000 and p.snapshot().steps.count == 5000
    p.seek_step(12)
    assert p.snapshot().steps.count == 12
    t = ix.start_t + 200.0
    p.seek_time(t)
    assert p.now <= t
    nxt = p._peek()
    assert nxt is None or (event_time(nxt) or 0) > t


def test_index_finds_stalls_and_gaps(long_recording: Path) -> None:
    ix = ReplayIndex(long_recording)
    ix.build()
    snap_p50 = Player(ix)
    assert ix.gaps, "the 30 s evaluation pause is a between-steps interval"
    t0, t1, _ = ix.gaps[0]
    assert 29 < t1 - t0 < 31
    assert ix.next_between(ix.start_t) == (t0, ix.gaps[0][2])
    for _t, n, _, beyond in ix.stalls:
        snap_p50.seek_step(n)
        s = snap_p50.snapshot().steps
        assert s.recent[-1].duration >= 2.5 * s.p50  # the Steps panel marks it ▲
        assert beyond == pytest.approx(s.recent[-1].duration - s.p50, rel=0.2)
    if ix.stalls:
        assert ix.next_stall(ix.start_t) == (ix.stalls[0][0], ix.stalls[0][2])


def test_real_recording_seeks(recordings: dict[str, Path]) -> None:
    path = recordings["starved"]
    ix = ReplayIndex(path).start()
    assert ix.wait(30) and ix.error is None
    p = Player(ix)
    p.seek_step(20)
    assert p.snapshot().steps.count == 20
    p.seek_event(3)
    assert p.snapshot() == straight(path, 3).snapshot()


def test_a_recording_cut_in_the_middle_replays_to_its_last_whole_record(
    recordings: dict[str, Path], tmp_path: Path
) -> None:
    src = recordings["starved"]
    data = src.read_bytes()
    cut = tmp_path / "cut.perftop"
    cut.write_bytes(data[: len(data) * 2 // 3])
    whole = list(read_events(src))
    ix = ReplayIndex(cut)
    ix.build()
    assert 0 < ix.events < len(whole)
    assert any("truncated" in w for w in ix.warnings())
    p = Player(ix)
    p.seek_event(ix.events)
    assert p.finished
    # what it replays is exactly the start of the whole recording
    assert p.snapshot() == straight(src, ix.events).snapshot()
    assert cut.read_bytes() == data[: len(data) * 2 // 3]  # reading never writes


def test_controller_jumps_and_waits_for_the_index(long_recording: Path) -> None:
    """Commands from another thread; a seek past what is indexed waits, then lands."""
    import threading

    from perftop.replay.controller import ReplayController, parse_target

    states, notices, got = [], [], threading.Event()

    def on_update(snap, state) -> None:
        states.append((snap, state))
        got.set()

    ix = ReplayIndex(long_recording)
    ctl = ReplayController(ix, on_update, notices.append, playing=False)
    ix.start()
    ctl.start()
    try:

        def after(cmd: tuple, cond) -> tuple:
            ctl.command(*cmd)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if states and cond(states[-1][1]):
                    return states[-1]
                time.sleep(0.02)
            raise AssertionError(f"{cmd}: {states[-1][1] if states else None}")

        snap, st = after(("step", 7000), lambda s: s.step == 7000)
        assert snap.steps.count == 7000 and ix.steps >= 7000
        after(("step", 10), lambda s: s.step == 10)
        t0, _, at = ix.gaps[0]
        _, st = after(("jump", "between"), lambda s: s.event == at)
        assert st.step == 3000  # the evaluation pause follows step 3000
        deadline = time.monotonic() + 60
        while ix.next_stall(t0) is None and time.monotonic() < deadline:
            time.sleep(0.02)  # the index reads on: the next stall may not be found yet
        stall = ix.next_stall(t0)
        snap, st = after(("jump", "stall"), lambda s: s.event == stall[1])
        assert snap.steps.recent[-1].t1 == stall[0]  # the stall is the newest step shown
        kind, secs = parse_target("1:30")
        snap, st = after((kind, secs), lambda s: s.now_t is not None and s.now_t <= ix.start_t + 90)
        assert st.now_t > ix.start_t + 89
        after(("speed", 2), lambda s: s.speed == 4.0)
        after(("fast",), lambda s: s.fast)
        after(("play",), lambda s: s.at_end)
        assert states[-1][0].steps.count == 8000
        # the clock that played through it never reads past the recording's end
        assert all(s.now_t <= ix.end_t for _, s in states if s.now_t is not None)
        _, st = after(("seconds", 30.0), lambda s: s.now_t == ix.end_t)
        _, st = after(("time", -5.0), lambda s: s.now_t == ix.start_t)
    finally:
        ctl.stop()


def test_parse_target() -> None:
    from perftop.replay.controller import parse_target

    assert parse_target("1200") == ("step", 1200)
    assert parse_target("#7") == ("step", 7)
    assert parse_target("90s") == ("time", 90)
    assert parse_target("2h") == ("time", 7200)
    assert parse_target("1:02:03") == ("time", 3723)
    with pytest.raises(ValueError, match="give a step"):
        parse_target("soon")
