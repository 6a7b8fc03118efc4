"""Pilot tests: the real app driven by the real messages from a fake source."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import io

import pytest
from rich.console import Console

from perftop.model.snapshot import ProcRow
from perftop.tui.app import PerftopApp
from perftop.tui.messages import JobEnded, SnapshotMessage
from perftop.tui.screens import HelpScreen, QuitScreen
from perftop.tui.widgets import GpuPanel, HeaderBar, OutputPanel, ProcessesPanel
from tests.helpers import closing_session
from tests.tui.fakes import MAIN, WORKERS, FakeController, FakeSource, snapshot

SIZE = (160, 48)


def aio(fn):
    """Run an async test on a fresh loop (no pytest-asyncio needed)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        asyncio.run(fn(*args, **kwargs))

    return run


def text_of(widget) -> str:
    """The plain text a Static shows (its Rich renderable, printed without styles)."""
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(widget.content)
    return console.export_text()


async def settle(pilot, n: int = 3) -> None:
    for _ in range(n):
        await pilot.pause()


@contextlib.asynccontextmanager
async def showing(snap, size=SIZE):
    """A fresh app at ``size`` once it has shown ``snap``, as a source's first snapshot
    leaves it: ``(app, pilot)``."""
    app = PerftopApp()
    async with app.run_test(size=size) as pilot:
        app.post_message(SnapshotMessage(snap))
        await settle(pilot)
        yield app, pilot


@aio
async def test_snapshot_reaches_every_panel() -> None:
    async with showing(snapshot()) as (app, pilot):
        header = text_of(app.query_one(HeaderBar))
        assert "python train.py --epochs 3" in header
        assert "running" in header and "0:01:23" in header
        assert "steps 1,354" in text_of(app.query_one("#steps Static"))
        assert "util" in text_of(app.query_one("#gpu Static"))
        assert "iowait" in text_of(app.query_one("#host Static"))
        table = app.query_one(ProcessesPanel).table
        assert table.row_count == 1 + len(WORKERS)
        assert app.query_one("#sync").table.row_count == 4
        assert len(app.query_one(OutputPanel).log_view.lines) == 30
        assert not app._errors
        assert len(app.panels) == sum(1 for b in PerftopApp.BINDINGS if b.key.isdigit())


@aio
async def test_thread_source_is_coalesced_and_latest_wins() -> None:
    app = PerftopApp()
    shown: list[int] = []
    real_show = app.show

    def counting_show(snap):
        shown.append(snap.steps.count)
        real_show(snap)

    app.show = counting_show  # type: ignore[method-assign]
    snaps = [snapshot(steps=10 + i % 50, output_lines=1) for i in range(300)]
    async with app.run_test(size=SIZE) as pilot:
        FakeSource(app, snaps).start().thread.join()
        await settle(pilot, 5)
        assert shown[-1] == snaps[-1].steps.count
        assert len(shown) < len(snaps)  # older snapshots were replaced, not queued


@aio
async def test_processes_update_by_diff_without_rebuild() -> None:
    async with showing(snapshot()) as (app, pilot):
        table = app.query_one(ProcessesPanel).table
        table.clear = lambda *a, **k: pytest.fail("table rebuilt")  # type: ignore[method-assign]
        table.move_cursor(row=2)
        s0 = snapshot()
        new_worker = ProcRow(6000, cpu_percent=12.0)
        procs = (dataclasses.replace(s0.processes[0], cpu_percent=55.0),) + s0.processes[1:4]
        roles = s0.roles[:4]  # the last worker is gone
        s1 = dataclasses.replace(s0, processes=(*procs, new_worker), roles=roles)
        app.post_message(SnapshotMessage(s1))
        await settle(pilot)
        keys = {k.value for k in table.rows}
        assert keys == {str(MAIN), *map(str, WORKERS[:3]), "6000"}
        assert table.get_cell(str(MAIN), "cpu").plain == "55%"
        assert table.cursor_row == 2


@aio
async def test_sort_keys_and_header_click() -> None:
    async with showing(snapshot()) as (app, pilot):
        await pilot.press("4", "s")  # focus processes, sort by the next column (pid)
        table = app.query_one(ProcessesPanel).table
        assert table.sort_column == "pid"
        order = [table.get_row_at(i)[1].plain for i in range(table.row_count)]
        assert order == sorted(order, key=int)
        await pilot.press("i")
        order = [table.get_row_at(i)[1].plain for i in range(table.row_count)]
        assert order == sorted(order, key=int, reverse=True)
        await pilot.press("s")
        assert table.sort_column == "cpu"
        cpus = [table.get_row_at(i)[2].plain for i in range(table.row_count)]
        assert cpus[0] == "98%"  # highest CPU first
        for _ in range(len(table.columns)):  # every column shows its arrow on screen
            await pilot.press("s")
            await settle(pilot, 1)
            label = str(table.columns[table.sort_column].label)  # type: ignore[index]
            assert label[-1] in "▲▼" and label in table.render_line(0).text, label


@aio
async def test_zoom_and_back() -> None:
    async with showing(snapshot(), size=(80, 24)) as (app, pilot):
        await pilot.press("5", "z")
        assert app.screen.maximized is app.query_one("#sync")
        assert not app.query_one("#sync").compact  # zoomed panels show full detail
        await pilot.press("escape")
        assert app.screen.maximized is None
        assert app.query_one("#sync").compact


@aio
async def test_pause_holds_the_display() -> None:
    async with showing(snapshot(steps=10)) as (app, pilot):
        await pilot.press("p")
        assert "PAUSED" in text_of(app.query_one(HeaderBar))
        app.post_message(SnapshotMessage(snapshot(steps=20)))
        await settle(pilot)
        assert app.shown is not None and app.shown.steps.count == 1244
        await pilot.press("p")
        assert app.shown.steps.count == 1254
        assert "PAUSED" not in text_of(app.query_one(HeaderBar))


@pytest.mark.parametrize(("key", "choice"), [("l", "leave"), ("s", "stop")])
@aio
async def test_quit_asks_while_job_runs(key: str, choice: str) -> None:
    app = PerftopApp(FakeController(running=True))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, QuitScreen) and app.is_running
        await pilot.press("ctrl+c")  # Ctrl-C asks too, never kills silently
        assert isinstance(app.screen, QuitScreen)
        await pilot.press(key)
    assert app.return_value == choice


@pytest.mark.parametrize(("keys", "choice"), [
    (("enter",), "leave"),  # q then Enter out of habit: the job runs on
    (("left", "enter"), "stop"),
    (("right", "enter"), None),
    (("right", "right", "left", "enter"), None),
])  # fmt: skip
@aio
async def test_quit_buttons_start_on_leave_and_move_with_arrows(
    keys: tuple[str, ...], choice: str | None
) -> None:
    app = PerftopApp(FakeController(running=True))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        assert isinstance(app.screen, QuitScreen)
        await pilot.press(*keys)
        await pilot.pause()
        if choice is None:  # cancelled: back to the panels, perftop runs on
            assert not isinstance(app.screen, QuitScreen) and app.is_running
            await pilot.press("q", "s")
            choice = "stop"
    assert app.return_value == choice


@aio
async def test_the_demos_quit_starts_on_stop() -> None:
    """The bundled demo trains until stopped: Enter must not leave it running unseen."""
    from dataclasses import replace

    from perftop.demo import TRAIN_MODULE

    base = snapshot()
    demo = replace(base, meta=replace(base.meta, command=("python", "-m", TRAIN_MODULE)))
    app = PerftopApp(FakeController(running=True))
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(SnapshotMessage(demo))
        await settle(pilot)
        await pilot.press("q")
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("enter")
    assert app.return_value == "stop"


@aio
async def test_quit_is_immediate_once_job_exited() -> None:
    app = PerftopApp(FakeController(running=False))
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(JobEnded(3))
        await settle(pilot)
        await pilot.press("q")
    assert app.return_value is None


@aio
async def test_help_screen_opens_and_closes() -> None:
    app = PerftopApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("x")
        assert not isinstance(app.screen, HelpScreen)


@aio
async def test_record_toggle_goes_to_controller() -> None:
    ctl = FakeController()
    app = PerftopApp(ctl)
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(SnapshotMessage(snapshot()))
        await settle(pilot)
        await pilot.press("r")
        assert ctl.toggles == 1
        assert "perftop-test.perftop" in text_of(app.query_one(HeaderBar))
        await pilot.press("r")
        assert "rec off" in text_of(app.query_one(HeaderBar))


@aio
async def test_widget_error_becomes_notification() -> None:
    app = PerftopApp()

    def boom(snap):
        raise ValueError("bad figure")

    async with app.run_test(size=SIZE) as pilot:
        app.query_one(GpuPanel).render_body = boom  # type: ignore[method-assign]
        app.post_message(SnapshotMessage(snapshot()))
        await settle(pilot)
        notes = list(app._notifications)
        assert any("bad figure" in n.message and n.severity == "error" for n in notes)
        assert "steps 1,354" in text_of(app.query_one("#steps Static"))  # others still render


@aio
async def test_output_appends_only_new_lines() -> None:
    async with showing(snapshot(output_lines=1)) as (app, pilot):
        assert app.query_one(OutputPanel).border_subtitle == "1 line"
        app.post_message(SnapshotMessage(snapshot(output_lines=30)))
        await settle(pilot)
        app.post_message(SnapshotMessage(snapshot(output_lines=35)))
        await settle(pilot)
        log = app.query_one(OutputPanel).log_view
        assert len(log.lines) == 35
        assert app.query_one(OutputPanel).border_subtitle == "35 lines"


@aio
async def test_a_warning_each_rank_gives_alike_is_one_line_naming_them() -> None:
    """Two ranks of a job that steps a compiled optimizer each warn alike: one line says
    it, with both hooks, not two lines that read as two problems."""
    from perftop.hook.optim_steps import COMPILED_STEP_NOTE
    from perftop.model.snapshot import NoteRow

    app = PerftopApp()
    async with app.run_test(size=(160, 48)) as pilot:
        s = snapshot()
        said = tuple(NoteRow(100.0 + i, "warning", f"hook:{pid}", COMPILED_STEP_NOTE)
                     for i, pid in enumerate((4101, 4102)))  # fmt: skip
        app.post_message(SnapshotMessage(dataclasses.replace(s, notes=s.notes + said)))
        await settle(pilot)
        text = " ".join(text_of(app.query_one("#hints Static")).split())
        assert text.count(" ".join(COMPILED_STEP_NOTE.split()[:6])) == 1, text
        assert "(hook:4101, hook:4102)" in text, text
        assert "PSS needs permission for 1 process (probe)" in text, text


@aio
async def test_no_data_states_are_plain() -> None:
    app = PerftopApp()
    async with app.run_test(size=(80, 24)) as pilot:
        s = snapshot(gpus=False)
        s = dataclasses.replace(s, sync=(), notes=(), hints=())
        app.post_message(SnapshotMessage(s))
        await settle(pilot)
        assert "no GPU" in text_of(app.query_one("#gpu Static"))
        assert "no hints yet: nothing found" in text_of(app.query_one("#hints Static"))
        # a run too short for the step rules says so, not that nothing was found
        app.post_message(
            SnapshotMessage(dataclasses.replace(s, steps=dataclasses.replace(s.steps, count=3)))
        )
        await settle(pilot)
        assert "3 steps so far (the step rules wait for 10)" in text_of(
            app.query_one("#hints Static")
        )
        # once the job is over, neither panel says "yet"
        over = dataclasses.replace(s.meta, exit_code=0, ended=True)
        app.post_message(SnapshotMessage(dataclasses.replace(s, meta=over)))
        await settle(pilot)
        assert "no hints: nothing found that slowed" in text_of(app.query_one("#hints Static"))
        app.post_message(
            SnapshotMessage(
                dataclasses.replace(
                    s, meta=over, trainers=(), steps=dataclasses.replace(s.steps, count=0)
                )
            )
        )
        await settle(pilot)
        assert "the job made 0 steps (the step rules need 10)" in text_of(
            app.query_one("#hints Static")
        )
        steps = text_of(app.query_one("#steps Static"))
        assert "no training process connected before the job ended" in steps
        await asyncio.sleep(0)


def test_not_available_sorts_last_in_both_directions() -> None:
    from perftop.tui.widgets.difftable import Cell, _sort_key

    cells = [Cell("N/A", None), Cell("2", 2.0), Cell("1", 1.0)]
    up = sorted(cells, key=lambda c: _sort_key(c, False))
    down = sorted(cells, key=lambda c: _sort_key(c, True), reverse=True)
    assert [c.value for c in up] == [1.0, 2.0, None]
    assert [c.value for c in down] == [2.0, 1.0, None]


def test_help_and_the_docs_list_the_panel_keys_there_are() -> None:
    from pathlib import Path

    from perftop.tui.screens.help import KEYS

    digits = sorted(b.key for b in PerftopApp.BINDINGS if b.key.isdigit())
    listed = f"{digits[0]} … {digits[-1]}"
    help_line = dict(KEYS)[listed]
    assert help_line.count(",") + 1 == len(digits)  # one panel named per key
    keys_page = (Path(__file__).parents[2] / "docs" / "screen.md").read_text()
    assert f"`{digits[0]}`…`{digits[-1]}`" in keys_page


@aio
async def test_a_snapshot_that_beats_the_stacks_screen_compose_is_no_crash() -> None:
    from perftop.tui.screens import StacksScreen

    app = PerftopApp()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(StacksScreen(None))
        app.show(snapshot())  # before the screen composed its panel
        await settle(pilot)
        assert isinstance(app.screen, StacksScreen) and not app._errors
        app.show(snapshot())
        assert app.screen.snap is not None


@aio
async def test_a_snapshot_after_shutdown_is_dropped() -> None:
    """A source thread's last snapshot can land after the app has closed its screens."""
    async with showing(snapshot()) as (app, _pilot):
        assert app.screen_stack
    assert not app.screen_stack
    app.show(snapshot())  # raised ScreenStackError before
    assert app.shown is not None


@aio
async def test_header_says_the_recording_was_saved_once_the_job_ended() -> None:
    app = PerftopApp()
    async with app.run_test(size=SIZE) as pilot:
        snap = snapshot()
        meta = dataclasses.replace(snap.meta, record_path="/tmp/run.perftop")
        app.post_message(SnapshotMessage(dataclasses.replace(snap, meta=meta)))
        await settle(pilot)
        assert "rec run.perftop" in text_of(app.query_one(HeaderBar))
        ended = dataclasses.replace(meta, exit_code=0)
        app.post_message(SnapshotMessage(dataclasses.replace(snap, meta=ended)))
        await settle(pilot)
        header = text_of(app.query_one(HeaderBar))
        assert "saved run.perftop" in header and "rec run.perftop" not in header


@aio
async def test_header_names_a_process_cut_short_once_the_job_ended() -> None:
    async with showing(closing_session(True, close=False)) as (app, pilot):
        header = text_of(app.query_one(HeaderBar))
        assert "pid 42  cut short (last steps missing)" in header, header
    async with showing(closing_session(True, close=True)) as (app, pilot):
        assert "cut short" not in text_of(app.query_one(HeaderBar))


@aio
async def test_the_header_counts_the_workers_running_now() -> None:
    """A loader without persistent workers starts new ones each epoch; the old ones stay
    in the Processes table a few seconds, struck through. The header counts the running
    ones while the job runs (it counted both: "+8 workers" for 2 loaders of 2), and every
    worker shown once the job ended."""
    snap = snapshot()
    gone = set(WORKERS[:2])
    procs = tuple(dataclasses.replace(p, alive=p.pid not in gone) for p in snap.processes)
    running = dataclasses.replace(snap, processes=procs)
    async with showing(running) as (app, _pilot):
        header = text_of(app.query_one(HeaderBar))
        assert f"+{len(WORKERS) - 2} workers" in header, header
        assert app.query_one(ProcessesPanel).table.row_count == 1 + len(WORKERS)
    ended = dataclasses.replace(running, meta=dataclasses.replace(snap.meta, exit_code=0))
    async with showing(ended) as (app, _pilot):
        assert f"+{len(WORKERS)} workers" in text_of(app.query_one(HeaderBar))


@aio
async def test_a_worker_that_exited_before_any_probe_tick_is_struck_through() -> None:
    """An evaluation loader's workers can live a fraction of a second: no probe tick sees
    them, and their rows read N/A as if their first sample were to come. Their own last
    report says they exited: struck through, and not counted as running."""
    from perftop.model.workers import WorkerRow
    from perftop.tui.widgets.processes import table_rows

    snap = snapshot()
    quick = WORKERS[-1]
    t = snap.meta.now_t or 0.0
    row = WorkerRow(quick, MAIN, len(WORKERS) - 1, len(WORKERS), t - 0.4, t - 0.1, True, 2,
                    0.2, 0.1)  # fmt: skip
    snap = dataclasses.replace(snap, workers=(*snap.workers, row),
                               processes=tuple(p for p in snap.processes if p.pid != quick))  # fmt: skip
    rows = table_rows(snap)
    assert "strike" in rows[str(quick)][0].style and "strike" not in rows[str(WORKERS[0])][0].style
    assert rows[str(quick)][2].value is None  # its CPU: never measured
    async with showing(snap) as (app, _pilot):
        assert f"+{len(WORKERS) - 1} workers" in text_of(app.query_one(HeaderBar))


@aio
async def test_a_stall_that_was_work_after_training_is_said_so_once_the_job_ended() -> None:
    """Live, no step for 2.1 s after the 10th is a stall (its notice); once the job has
    exited with 0 and no step came, the app says what it was, once, as the headless
    summary does. A job that failed there keeps its stall: nothing more is said."""
    from perftop.events import JobExit, StallCapture, Step
    from perftop.model import Session, Snapshot

    def run(code: int) -> tuple[Snapshot, Snapshot]:
        s = Session()
        for i in range(10):
            s.apply(Step(MAIN, i, 100.0 + i * 0.1, 100.1 + i * 0.1))
        s.apply(StallCapture(103.1, MAIN, 10, 2.1, 0.1))
        live = s.snapshot(window=None)
        s.apply(JobExit(104.0, MAIN, code))
        return live, s.snapshot(window=None)

    for code in (0, 1):
        live, ended = run(code)
        app = PerftopApp()
        async with app.run_test(size=SIZE) as pilot:
            app.post_message(SnapshotMessage(live))
            await settle(pilot)
            for _ in range(2):  # the end, and a snapshot after it: said once
                app.post_message(SnapshotMessage(ended))
                await settle(pilot)
            notes = [n.message for n in app._notifications]
            assert [n for n in notes if "step 11 stalled 2.1 s" in n], notes
            said = [n for n in notes if "work after training (said live as a stall)" in n]
            assert len(said) == (1 if code == 0 else 0), notes
            if said:
                assert said[0].startswith(
                    f"after the last step (10) of pid {MAIN}: no step in the 2.1 s"
                )
                from perftop.tui.screens import StacksScreen
                from perftop.tui.widgets import StacksPanel

                await pilot.press("k")  # the Stacks panel says it in the same words
                await settle(pilot)
                assert isinstance(app.screen, StacksScreen)
                first = text_of(app.screen.query_one(StacksPanel)._body).splitlines()[0]
                assert first.startswith(
                    f"no step: after the last step (10) of pid {MAIN}: no step in the 2.1 s"
                ), first


@aio
async def test_header_gives_perftop_cpu_over_the_run_once_the_job_ended() -> None:
    """perftop's last CPU reading is taken as the job ends, of the end's own work (the whole
    run's figures and hints: 18% after a DDP job whose monitor read 6-8% throughout), and
    the screen stays on it: once the job ended the header gives the mean of its readings
    ("avg"); while it runs, the latest."""
    from perftop.events import JobExit, JobStart, MonitorStats
    from perftop.model import Session

    s = Session()
    s.apply(JobStart(1000.0, 42))
    for i, cpu in enumerate((5.0, 7.0, 6.0, 18.0)):
        s.apply(MonitorStats(1001.0 + i, cpu, 100 << 20))
    async with showing(s.snapshot()) as (app, _pilot):
        header = text_of(app.query_one(HeaderBar))
        assert "perftop CPU 18%" in header and "avg" not in header, header
    s.apply(JobExit(1005.0, 42, 0))
    async with showing(s.snapshot()) as (app, _pilot):
        assert "perftop CPU 9.0% avg" in text_of(app.query_one(HeaderBar))
