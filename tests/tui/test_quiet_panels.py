"""Work nobody sees is not done: a panel whose text did not change is not repainted, and
panels zoomed away are not updated until they are shown again."""

from __future__ import annotations

import dataclasses
import re
from unittest import mock

from textual.widget import Widget

from perftop.hints.between import between_steps
from perftop.model.snapshot import BetweenRow, OutputLine, SyncSite
from perftop.tui.messages import SnapshotMessage
from perftop.tui.widgets import (
    GpuPanel,
    HeaderBar,
    HintsPanel,
    HostPanel,
    OutputPanel,
    ProcessesPanel,
    StepsPanel,
    SyncPanel,
)
from tests.tui.fakes import snapshot
from tests.tui.test_app import aio, settle, showing, text_of


def spy(widget) -> list[dict]:
    """The calls of ``widget.refresh`` from now on (their keyword arguments)."""
    calls: list[dict] = []
    real = widget.refresh

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    widget.refresh = counted
    return calls


@aio
async def test_a_panel_whose_text_is_unchanged_is_not_repainted() -> None:
    snap = snapshot()
    async with showing(snap) as (app, pilot):
        host, hints = app.query_one(HostPanel), app.query_one(HintsPanel)
        sync = app.query_one(SyncPanel)
        header = app.query_one(HeaderBar)
        procs = app.query_one(ProcessesPanel)  # its subtitle is set again, the same
        assert procs.border_subtitle
        watched = (host._body, hints._body, sync.summary, header, procs, sync)
        spied = {w: spy(w) for w in watched}
        app.post_message(SnapshotMessage(snap))  # the same figures again
        await settle(pilot)
        assert {type(w).__name__: c for w, c in spied.items() if c} == {}
        busier = dataclasses.replace(snap.host, cpu_percent=(snap.host.cpu_percent or 0) + 7)
        app.post_message(SnapshotMessage(dataclasses.replace(snap, host=busier)))
        await settle(pilot)
        assert spied[host._body] == [{"layout": False}]  # as many lines: no new layout
        assert spied[hints._body] == [] and spied[header] == []
        assert f"CPU {busier.cpu_percent:.0f}%" in text_of(host._body)


@aio
async def test_panels_zoomed_away_are_not_updated_until_shown_again() -> None:
    async with showing(snapshot(steps=10)) as (app, pilot):
        steps, host = app.query_one(StepsPanel), app.query_one(HostPanel)
        await pilot.press("z")
        assert app.screen.maximized is steps
        app.post_message(SnapshotMessage(snapshot(steps=20)))
        await settle(pilot)
        assert steps._last is not None and steps._last.steps.count == 1254
        assert host._last is not None and host._last.steps.count == 1244  # not drawn, not updated
        await pilot.press("escape")
        await settle(pilot)
        assert host._last is not None and host._last.steps.count == 1254  # caught up


@aio
async def test_a_text_panel_whose_text_loses_a_line_keeps_its_height_without_a_layout() -> None:
    """A line that comes and goes (a figure that fits its line or not) would lay the whole
    screen out twice each time: the body keeps the height of its tallest text instead."""
    snap = snapshot()
    async with showing(snap) as (app, pilot):
        body = app.query_one(HostPanel)._body
        height = body.size.height
        calls = spy(body)
        shorter = dataclasses.replace(
            snap, host=dataclasses.replace(snap.host, shm_used_bytes=None)
        )
        app.post_message(SnapshotMessage(shorter))  # no /dev/shm line
        await settle(pilot)
        assert "shm" not in text_of(body)
        app.post_message(SnapshotMessage(snap))  # and back
        await settle(pilot)
        assert "shm" in text_of(body)
        assert calls == [{"layout": False}, {"layout": False}]
        assert body.size.height == height


@aio
async def test_a_table_draws_again_only_the_rows_whose_figures_changed() -> None:
    """Textual's own update_cell has the whole table drawn (header, every row and blank
    line) for any one cell."""
    snap = snapshot()
    async with showing(snap) as (app, pilot):
        table = app.query_one(ProcessesPanel).table
        calls: list[tuple] = []  # the refreshes that reach Textual's widget
        real = Widget.refresh

        def counted(self, *regions, **kwargs):
            if self is table:
                calls.append(regions)
            return real(self, *regions, **kwargs)

        w0 = snap.processes[1]
        procs = (snap.processes[0], dataclasses.replace(w0, cpu_percent=41.0), *snap.processes[2:])
        with mock.patch.object(Widget, "refresh", counted):
            app.post_message(SnapshotMessage(dataclasses.replace(snap, processes=procs)))
            await settle(pilot)
        assert len(calls) == 1 and len(calls[0]) == 1, calls  # one region: worker 0's row
        drawn = ["".join(s.text for s in strip) for strip in table.render_lines(table.size.region)]
        row = next(line for line in drawn if str(w0.pid) in line)
        assert " 41%" in row and " 40%" not in row


@aio
async def test_hints_equal_to_the_last_ones_are_not_wrapped_again() -> None:
    snap = snapshot()
    async with showing(snap) as (app, pilot):
        hints = app.query_one(HintsPanel)
        drawn: list[int] = []
        real = hints.render_body
        hints.render_body = lambda s: drawn.append(1) or real(s)  # type: ignore[method-assign]
        h = snap.hints[0]
        moved = dataclasses.replace(h, est_gain=(h.est_gain or 0) + 0.01, since_t=1.0)
        later = dataclasses.replace(snap, steps=snapshot(steps=30).steps)
        app.post_message(
            SnapshotMessage(dataclasses.replace(later, hints=(moved, *snap.hints[1:])))
        )
        await settle(pilot)
        assert drawn == []  # other steps, the same lines (a gain not shown moved)
        other = dataclasses.replace(h, evidence=("another line of evidence", *h.evidence[1:]))
        app.post_message(SnapshotMessage(dataclasses.replace(snap, hints=(other, *snap.hints[1:]))))
        await settle(pilot)
        assert drawn == [1] and "another line of evidence" in text_of(hints._body)


@aio
async def test_the_sync_panels_same_sites_are_not_formatted_again() -> None:
    snap = snapshot()
    async with showing(snap) as (app, pilot):
        sync = app.query_one(SyncPanel)
        app.post_message(SnapshotMessage(snap))  # laid out now: its room is the table's
        await settle(pilot)
        drawn: list[int] = []
        real = sync.table.set_rows
        sync.table.set_rows = lambda rows: drawn.append(len(rows)) or real(rows)  # type: ignore[method-assign]
        later = dataclasses.replace(snap, steps=snapshot(steps=30).steps)  # other steps
        app.post_message(SnapshotMessage(later))
        await settle(pilot)
        assert drawn == []
        s = snap.sync[0]
        more = dataclasses.replace(s, count=s.count + 5, per_step=s.per_step * 2)
        app.post_message(SnapshotMessage(dataclasses.replace(later, sync=(more, *snap.sync[1:]))))
        await settle(pilot)
        assert drawn == [len(snap.sync) + len(snap.sync_between)]
        assert f"{more.count:,}" in " ".join(str(c) for c in sync.table.get_row_at(0))
        await pilot.resize_terminal(120, 40)  # another room: drawn again for it
        await settle(pilot)
        assert len(drawn) == 2


@aio
async def test_the_sync_panel_lists_an_evaluations_syncs_per_pass() -> None:
    """Syncs made between steps (an evaluation's ``int()`` per batch) are on the screen as
    in ``perftop report``: their rate per pass, and the passes watched, after the steps'
    own sites (they were in the report only)."""
    base = snapshot()
    evals = (
        SyncSite("int", "/home/u/train.py", 131, "evaluate", "potential", 40, 0.0,
                 per_pass=8.0, passes=5),
    )  # fmt: skip
    snap = dataclasses.replace(base, sync=base.sync[:1], sync_between=evals)
    async with showing(snap) as (app, pilot):
        sync = app.query_one(SyncPanel)
        table = sync.table
        rows = [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert any("8.0/pass" in r and "train.py:131" in r for r in rows), rows
        assert sync.border_subtitle.endswith("5 passes between steps"), sync.border_subtitle
        assert sync.border_subtitle.startswith("2 sites")


@aio
async def test_a_hints_first_advice_cut_to_its_room_is_never_replaced_by_a_later_one() -> None:
    """PPO's rollouts (the figures of a real `perftop run` of tests/workloads/sb3_ppo.py):
    at 160x48 the between-steps hint's first advice, about the function that spends the
    time, does not fit whole below its evidence. It is shown cut ("…"), not left out for
    the shorter, lesser advice after it; zoomed, all of it is there."""
    base = snapshot()
    rollout = BetweenRow(
        "rollout", 16.02, 156, site="collect_rollouts (on_policy_algorithm.py:218)",
        site_s=16.02, forward_s=10.9, measured_s=16.02,
    )  # fmt: skip
    start = base.meta.start_t or 0.0
    meta = dataclasses.replace(base.meta, start_t=start, now_t=start + 21.6, exit_t=None)
    snap = dataclasses.replace(base, between=(rollout,), meta=meta)
    (hint,) = between_steps(snap, frozenset())
    first, later = hint.advice[0], hint.advice[-1]
    snap = dataclasses.replace(snap, hints=(hint, *base.hints))
    async with showing(snap) as (app, pilot):
        panel = app.query_one(HintsPanel)
        shown = " ".join(text_of(panel._body).split())
        assert shown.count("try:") == 1 and first[:40] in shown and "…" in shown
        assert later not in shown
        panel.focus()
        await pilot.press("z")
        await settle(pilot)
        zoomed = " ".join(text_of(panel._body).split())
        assert first in zoomed and later in zoomed and "…" not in zoomed


@aio
async def test_a_new_subtitle_repaints_only_the_panels_bottom_line() -> None:
    """The Output panel's line count changes with each line the job prints: the panel's
    box is not drawn again for it, only the bottom border where the count is."""
    snap = snapshot(output_lines=30)
    async with showing(snap, size=(160, 48)) as (app, pilot):
        panel = app.query_one(OutputPanel)
        drawn: list[int] = []
        real = panel._styles_cache.render_line

        def counted(styles, y, *args, **kwargs):
            drawn.append(y)
            return real(styles, y, *args, **kwargs)

        panel._styles_cache.render_line = counted
        more = snap.output + (OutputLine(0.0, "stdout", "one more line"),)
        app.post_message(SnapshotMessage(dataclasses.replace(snap, output=more, output_total=31)))
        await settle(pilot)
        assert panel.border_subtitle == "31 lines"
        assert drawn == [panel.outer_size.height - 1]
        bottom = app.screen._compositor.render_update(full=True)  # what the terminal gets
        screen = "".join(bottom.render_segments(app.console))
        assert "31 lines" in re.sub(r"\x1b\[[0-9;]*m", "", screen)


def screen_text(app) -> list[str]:
    """The screen as the terminal gets it, line by line, without styles."""
    bottom = app.screen._compositor.render_update(full=True)
    screen = "".join(bottom.render_segments(app.console))
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "\n", screen).split("\n")


@aio
async def test_a_reason_longer_than_its_panel_is_shown_whole_where_a_short_one_was() -> None:
    """A lone line of text (a panel's reason for showing no figures) is wrapped by Textual
    to the panel's width, so it may take more lines than the text it replaces: the panel is
    laid out again. (It was not, where the last text was as many lines long: the GPU panel
    showed "no GPU", then cut NVML's reason after "(no NVIDIA", with no ellipsis.)"""
    why = "NVML library not found (no NVIDIA driver installed)"
    snap = dataclasses.replace(snapshot(gpus=False), gpu_note="")
    async with showing(snap, size=(160, 48)) as (app, pilot):
        gpu = app.query_one(GpuPanel)
        assert gpu.body_width < len(why)  # the reason cannot fit one line
        assert any("no GPU" in line for line in screen_text(app))
        app.post_message(SnapshotMessage(dataclasses.replace(snap, gpu_note=why)))
        await settle(pilot)
        shown = " ".join(re.sub(r"[│┃|]", " ", line) for line in screen_text(app))
        assert "driver installed)" in shown, shown
