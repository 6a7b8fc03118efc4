"""Pilot tests of `perftop replay`: the real app fed from real recordings by the replay
controller's thread; keys change what the panels show."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from perftop.tui.replay import make_replay
from perftop.tui.screens.seek import SeekScreen
from perftop.tui.widgets import HeaderBar, OutputPanel
from perftop.tui.widgets.replaybar import ReplayBar
from perftop.tui.widgets.timeline import MARK_SHARE, TimelineBar, timeline
from tests.tui.test_app import aio, text_of

SIZE = (160, 48)


async def until(pilot, cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


def notices(app) -> str:
    return "\n".join(n.message for n in app._notifications)


def steps_text(app) -> str:
    return text_of(app.query_one("#steps Static"))


@aio
async def test_seek_pause_play_and_speed(recordings: dict[str, Path]) -> None:
    app, ctl = make_replay(recordings["starved"], playing=False)
    async with app.run_test(size=SIZE) as pilot:
        ctl.start()
        try:
            await until(pilot, lambda: app.replay_state is not None and app.replay_state.index_done)
            assert app.replay_state.step == 0 and not app.replay_state.playing
            assert "PAUSED" in text_of(app.query_one(ReplayBar))
            await pilot.press("g")
            await until(pilot, lambda: isinstance(app.screen, SeekScreen))
            prompt = app.screen.query("Label").first()
            shown = " ".join(prompt.render_line(y).text for y in range(prompt.size.height))
            assert "(90s, 1:30, 2h)" in shown  # the whole prompt, not cut short by its box
            assert prompt.region.right <= prompt.parent.content_region.right
            await pilot.press("2", "0", "enter")
            await until(pilot, lambda: app.replay_state.step == 20)
            await until(pilot, lambda: "steps 20 " in steps_text(app))
            await pilot.press("comma")  # one event back
            await until(pilot, lambda: app.replay_state.event < app.shown.events + 1)
            event = app.replay_state.event
            await pilot.press("full_stop", "full_stop")
            await until(pilot, lambda: app.replay_state.event == event + 2)
            await pilot.press("right_square_bracket", "right_square_bracket")  # 4x
            await until(pilot, lambda: app.replay_state.speed == 4.0)
            assert "4×" in text_of(app.query_one(ReplayBar))
            step = app.replay_state.step
            await pilot.press("space")
            await until(pilot, lambda: app.replay_state.step > step + 3)
            await pilot.press("p")  # the live pause key pauses the playback too
            await until(pilot, lambda: not app.replay_state.playing)
            await asyncio.sleep(0.3)
            shown = steps_text(app)
            await asyncio.sleep(0.5)
            assert steps_text(app) == shown  # paused: nothing moves
            await pilot.press("a", "space")  # as fast as possible, to the end
            await until(pilot, lambda: app.replay_state.at_end)
            assert "steps 40 " in steps_text(app) and "exited (0)" in text_of(
                app.query_one(HeaderBar)
            )
            assert "END" in text_of(app.query_one(ReplayBar))
            assert "fastest" in text_of(app.query_one(ReplayBar))
            # a headless run's output went to its terminal: the empty panel says so
            log = app.query_one(OutputPanel).log_view
            said = " ".join("".join(seg.text for seg in line) for line in log.lines)
            assert "wrote its output to its own terminal (perftop run --headless)" in said, said
        finally:
            ctl.stop()


@aio
async def test_timeline_and_jumps(recordings: dict[str, Path]) -> None:
    app, ctl = make_replay(recordings["fixed"], playing=False)
    async with app.run_test(size=SIZE) as pilot:
        ctl.start()
        try:
            await until(pilot, lambda: app.replay_state is not None and app.replay_state.index_done)
            bar = text_of(app.query_one(TimelineBar))
            assert "█" in bar and "0:00:" in bar
            ix = ctl.index
            await pilot.press("n")
            if ix.stalls:  # the first steps (worker start-up) are the fixed run's stalls
                await until(pilot, lambda: app.replay_state.event == ix.stalls[0][2])
                # the bar is redrawn on the app's next refresh after the jump: the position
                # cell sits at the replay's clock, which is the stall's end or a little later
                # (events stamped later may come before the step in the file), and the
                # cell of every stall that alone took 1% of a cell beyond the median, but
                # the position's, is a red ▲
                tb = app.query_one(TimelineBar)
                width = max(20, tb.content_region.width or 78)
                await until(
                    pilot,
                    lambda: text_of(tb).rstrip("\n") == timeline(app.replay_state, width).plain,
                )  # (text_of ends with the console's newline)
                st = app.replay_state
                shown = timeline(st, width).plain
                left, right = shown.split(" ", 1)[0], shown.rsplit(" ", 1)[1]
                cells = shown[len(left) + 1 : len(shown) - len(right) - 1]
                span = (st.end_t - st.start_t) / len(cells)
                cell = [
                    min(len(cells) - 1, int((s[0] - st.start_t) / span))
                    for s in ix.stalls
                    if s[3] >= MARK_SHARE * span
                ]
                assert ix.stalls[0][0] <= st.now_t < ix.stalls[0][0] + 1.0, (st.now_t, ix.stalls)
                pos = min(len(cells) - 1, int((st.now_t - st.start_t) / span))
                assert cells.index("█") == pos >= int((ix.stalls[0][0] - st.start_t) / span)
                assert cell and all(cells[c] == "▲" for c in cell if c != pos)
            else:
                await until(pilot, lambda: "no later slow step" in notices(app))
            await pilot.press("g")
            await until(pilot, lambda: isinstance(app.screen, SeekScreen))
            await pilot.press("x", "enter")  # not a step or a time: the prompt says so
            await pilot.pause()
            assert isinstance(app.screen, SeekScreen)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, SeekScreen))
            await pilot.press("r")  # recording is a live-only key: a notice, no crash
            await pilot.pause()
        finally:
            ctl.stop()


@aio
async def test_truncated_recording_replays_with_a_notice(
    recordings: dict[str, Path], tmp_path: Path
) -> None:
    data = recordings["starved"].read_bytes()
    cut = tmp_path / "cut.perftop"
    cut.write_bytes(data[: len(data) // 2])
    app, ctl = make_replay(cut, playing=False)
    async with app.run_test(size=SIZE) as pilot:
        ctl.start()
        try:
            await until(pilot, lambda: app.replay_state is not None and app.replay_state.index_done)
            await until(pilot, lambda: "truncated" in notices(app))
            await pilot.press("a", "space")
            await until(pilot, lambda: app.replay_state.at_end)
            assert app.replay_state.event == ctl.index.events > 0
        finally:
            ctl.stop()


@aio
async def test_the_key_bar_fits_80_columns_and_live_only_keys_still_answer(
    recordings: dict[str, Path],
) -> None:
    """At 80 columns the replay's key bar cut its last key ("] fas"): the live-only keys
    (record, capture) and those the replay bar lists (p, [, ]) are left out of it, and
    still answer when pressed."""
    from textual.widgets._footer import FooterKey

    app, ctl = make_replay(recordings["fixed"], playing=False)
    async with app.run_test(size=(80, 24)) as pilot:
        ctl.start()
        try:
            await until(pilot, lambda: app.replay_state is not None and app.replay_state.index_done)
            await pilot.pause(0.2)
            keys = {k.key: k for k in app.screen.query(FooterKey)}
            assert {"q", "question_mark", "g", "n"} <= set(keys)
            assert not {"r", "t", "p", "left_square_bracket"} & set(keys)
            assert all(k.region.right <= 80 for k in keys.values()), {
                k: v.region for k, v in keys.items()
            }
            await pilot.press("t")
            await until(pilot, lambda: "captures come from a live job" in notices(app))
            await pilot.press("p")
            await until(pilot, lambda: app.replay_state.playing)
        finally:
            ctl.stop()


@aio
async def test_arrows_seek_five_seconds_and_home_end_go_to_the_ends(
    recordings: dict[str, Path],
) -> None:
    """As in a video player: → and ← move 5 s, End and Home go to the recording's end and
    start. The replay's position is its clock: 5 s on is there, though the last event before
    it is earlier (a key from the last event's time, as ``<`` ``>`` were, never moved past a
    gap longer than its step). A focused table takes the arrows only where it can use them
    (Textual passes a key on that the focused widget cannot act on): one that fits its panel
    lets them seek."""
    from perftop.tui.widgets import ProcessesPanel

    app, ctl = make_replay(recordings["fixed"], playing=False)
    async with app.run_test(size=SIZE) as pilot:
        ctl.start()
        try:
            await until(pilot, lambda: app.replay_state is not None and app.replay_state.index_done)
            st = app.replay_state
            t0, to = st.now_t, min(st.now_t + 5.0, st.end_t)  # (a recording under 5 s: its end)

            async def at(t: float) -> None:
                await until(pilot, lambda: abs(app.replay_state.now_t - t) < 1e-6)

            await pilot.press("right")
            await at(to)
            assert app.shown.meta.now_t <= to  # (the panels show the events up to there)
            await pilot.press("left")
            await at(t0)
            await pilot.press("end")
            await until(pilot, lambda: app.replay_state.at_end)
            assert app.replay_state.step == app.replay_state.steps_total > 0
            await pilot.press("home")
            await until(pilot, lambda: app.replay_state.step == 0)
            await at(st.start_t)
            for _ in range(3):
                await pilot.press("greater_than_sign")
            await at(min(st.start_t + 3.0, st.end_t))
            table = app.query_one(ProcessesPanel).table
            table.focus()
            await pilot.pause()
            assert app.focused is table and not table.allow_horizontal_scroll
            await pilot.press("left")
            await at(st.start_t)
        finally:
            ctl.stop()
