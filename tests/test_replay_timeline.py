"""The replay's timeline marks where slow steps cost the run time, not every jitter.

A tight loop's steps of 0.2 ms meet the scheduler: a step of 3x the median every few
hundred steps (2,019 in a 4-minute run of 1.1 million steps, 4,700 a second). Each one
marked its cell, and every cell of the bar was a red ``▲``. The recording here is written
as the hook writes one (step records, whole-nanosecond clocks), from such a loop with one
real hiccup in it."""

from __future__ import annotations

import random
from pathlib import Path

from perftop.events import Hello, JobExit, JobStart, SessionStart
from perftop.recording import RecordingWriter
from perftop.replay.controller import ReplayController
from perftop.replay.index import ReplayIndex
from perftop.tui.widgets.timeline import timeline
from perftop.wire import KIND_STEPS, STEP_RECORD, Frame

T0, PID = 1_790_000_000.0, 4242
STEPS, HICCUP = 60_000, 41_000


def tight_loop(path: Path) -> None:
    """60,000 steps of ~0.2 ms; one in 1,000 takes 0.7 ms (jitter), step HICCUP 60 ms."""
    rnd = random.Random(5)
    ns = 0
    w = RecordingWriter(path, force=True)
    w.write_events([SessionStart(T0, ("python", "fast.py"), "/w", "n1", 1, "0.1.0"),
                    JobStart(T0, PID, ("python", "fast.py")),
                    Hello(T0, PID, 1, "n1", ("fast.py",), 0, 0, 1, "2.13.0", "cpu")])  # fmt: skip
    recs = []
    for i in range(STEPS):
        t0 = T0 + ns / 1e9
        step = rnd.randrange(190_000, 210_000)
        if i % 1000 == 500:
            step = 700_000
        if i == HICCUP:
            step = 60_000_000
        ns += step
        recs.append(STEP_RECORD.pack(PID, i, t0, T0 + ns / 1e9, 0.0, step / 3e9, 2e-5, 3))
        ns += 3_000
        if len(recs) == 2000:
            w.write_frame(Frame(KIND_STEPS, b"".join(recs)))
            recs.clear()
    w.write_frame(Frame(KIND_STEPS, b"".join(recs)))
    w.write_events([JobExit(T0 + ns / 1e9, PID, 0)])
    w.close()


def test_only_the_cell_where_slow_steps_cost_time_is_marked(tmp_path: Path) -> None:
    path = tmp_path / "tight.perftop"
    tight_loop(path)
    ix = ReplayIndex(path)
    ix.build()
    assert len(ix.stalls) >= 55  # every jitter step is a slow step (n still finds each)
    ctl = ReplayController(ix, lambda snap, state: None, playing=False)
    try:
        state = ctl.state()
        bar = timeline(state, 100).plain
        left, right = bar.split(" ", 1)[0], bar.rsplit(" ", 1)[1]
        cells = bar[len(left) + 1 : len(bar) - len(right) - 1]
        span = (state.end_t - state.start_t) / len(cells)
        (hiccup,) = [s for s in ix.stalls if s[1] == HICCUP + 1]
        assert 0.059 < hiccup[3] < 0.061  # its time beyond the median
        marked = [i for i, c in enumerate(cells) if c == "▲"]
        assert marked == [int((hiccup[0] - state.start_t) / span)], cells
    finally:
        ctl.stop()


def test_the_index_of_a_long_single_process_run_stays_small(tmp_path: Path) -> None:
    """Each checkpoint is the session's state: a process that makes no collectives keeps
    no long history of its steps' spans for them (2,048 spans were a third of each of
    this loop's checkpoints, and the saved index of a 4-minute tight loop was 15 MB)."""
    path = tmp_path / "tight.perftop"
    tight_loop(path)
    ix = ReplayIndex(path)
    ix.build()
    sizes = [len(c.blob()) for c in ix.checkpoints]
    assert sizes and max(sizes) < 27_000, sizes  # 33.6 kB each with the spans
