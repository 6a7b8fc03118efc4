"""Panels' lines drawn straight to strips (``widgets/lines.py``) draw what Rich drew: the
same strips, segment for segment, as the ``Group`` of Rich text they replace, on the
snapshots of real recordings as they grow (the Steps chart shifting, slow-step marks,
hints and host lines coming and going)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group
from rich.text import Text
from textual.strip import Strip
from textual.visual import RichVisual, Visual
from textual.widget import Widget

from perftop.hints.session import hinted_session
from perftop.recording import read_events
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from perftop.tui.widgets.lines import Lines, Runs, text_segments
from perftop.tui.widgets.quiet import QuietStatic
from tests.tui.test_app import aio, settle

RECORDINGS = Path(__file__).parent / "recordings"


def growing(name: str, every: int) -> list:
    """Snapshots of a recording every ``every`` events, as a live session would show it."""
    session, out = hinted_session(), []
    for i, event in enumerate(read_events(str(RECORDINGS / name)), 1):
        session.apply(event)
        if i % every == 0:
            out.append(session.snapshot())
    out.append(session.snapshot())
    return out


def rich_strips(widget: QuietStatic, parts: tuple) -> list:
    """What Textual drew for these parts before: a Rich Group, links styled."""
    texts = [p.to_text() if isinstance(p, Runs) else p for p in parts]
    widget.set_reactive(Widget.auto_links, True)
    try:
        w, h = widget.size
        return Visual.to_strips(
            widget, RichVisual(widget, Group(*texts)), w, h, widget.visual_style
        )
    finally:
        widget.set_reactive(Widget.auto_links, False)


@aio
async def test_lines_draw_the_strips_rich_drew() -> None:
    compared: dict[str, int] = {}
    marks = 0
    for name, every, size in (("hogwild.perftop", 16, (160, 48)), ("stall.perftop", 6, (80, 24))):
        app = PerftopApp()
        async with app.run_test(size=size) as pilot:
            for snap in growing(name, every):
                app.post_message(SnapshotMessage(snap))
                await settle(pilot, 2)
                for widget in app.query(QuietStatic):
                    visual = widget.visual
                    if not isinstance(visual, Lines) or not widget.size.area:
                        continue
                    w, h = widget.size
                    drawn = Visual.to_strips(widget, visual, w, h, widget.visual_style)
                    assert drawn == rich_strips(widget, visual.parts), (name, widget.parent.id)
                    panel = widget.parent.id
                    compared[panel] = compared.get(panel, 0) + 1
                    marks += any(isinstance(p, Runs) and "▲" in p.plain for p in visual.parts)
    assert compared.get("steps", 0) >= 10 and compared.get("host", 0) >= 10, compared
    assert marks  # a slow step's mark drawn too


@aio
async def test_a_line_that_did_not_change_is_not_drawn_again() -> None:
    app = PerftopApp()
    snaps = growing("hogwild.perftop", 40)
    async with app.run_test(size=(160, 48)) as pilot:
        app.post_message(SnapshotMessage(snaps[-2]))
        await settle(pilot)
        body = app.query_one("#steps QuietStatic")
        w, h = body.size
        first = Visual.to_strips(body, body.visual, w, h, body.visual_style)
        app.post_message(SnapshotMessage(snaps[-1]))
        await settle(pilot)
        again = Visual.to_strips(body, body.visual, w, h, body.visual_style)
        parts = body.visual.parts  # type: ignore[attr-defined]
        kept = [a is b for a, b in zip(first, again, strict=True)]
        # the legend (last line) is the same Text: the same strip; the chart moved
        assert kept[-1] and not all(kept)
        assert isinstance(parts[-2], Runs)


def screen_of(app: PerftopApp) -> list[list[tuple[str, str]]]:
    """The screen as drawn: each line's cells, (character, style)."""
    lines = []
    for line in app.screen._compositor.render_update(full=True).strips:  # type: ignore[union-attr]
        strips = [line] if isinstance(line, Strip) else list(line)
        lines.append([(c, str(seg.style)) for st in strips for seg in st for c in seg.text])
    return lines


@aio
async def test_lines_repainted_alone_leave_the_screen_a_fresh_one_draws() -> None:
    """Only a panel's changed lines are repainted; after a run of snapshots the screen is
    the one an app that shows only the last snapshot draws."""
    snaps = growing("hogwild.perftop", 14)
    app = PerftopApp()
    async with app.run_test(size=(160, 48)) as pilot:
        body = app.query_one("#host QuietStatic")
        calls: list[tuple] = []
        real = body.refresh
        body.refresh = lambda *regions, **kw: calls.append(regions) or real(*regions, **kw)  # type: ignore[method-assign]
        for snap in snaps:
            app.post_message(SnapshotMessage(snap))
            await settle(pilot, 2)
        grown = screen_of(app)
        assert any(0 < len(regions) < body.size.height for regions in calls), calls
    fresh = PerftopApp()
    async with fresh.run_test(size=(160, 48)) as pilot:
        fresh.post_message(SnapshotMessage(snaps[-1]))
        await settle(pilot)
        assert screen_of(fresh) == grown


@aio
async def test_after_a_resize_the_screen_is_the_one_a_fresh_app_draws() -> None:
    """A terminal resized while the job runs (80x14 to 60x20, a tmux pane's sizes): the
    panels' kept lines and heights are drawn anew at the new size (the Steps chart kept a
    line of the old size's chart in its legend's place: it had wrapped there)."""
    snaps = growing("hogwild.perftop", 14)
    half = len(snaps) // 2
    app = PerftopApp()
    async with app.run_test(size=(80, 14)) as pilot:
        for snap in snaps[:half]:
            app.post_message(SnapshotMessage(snap))
            await settle(pilot, 2)
        await pilot.resize_terminal(60, 20)
        await settle(pilot)
        for snap in snaps[half:]:
            app.post_message(SnapshotMessage(snap))
            await settle(pilot, 2)
        resized = screen_of(app)
    fresh = PerftopApp()
    async with fresh.run_test(size=(60, 20)) as pilot:
        fresh.post_message(SnapshotMessage(snaps[-1]))
        await settle(pilot)
        assert screen_of(fresh) == resized


STYLE_NAMES = ("", "bold", "dim", "red", "bold cyan", "black on yellow", "italic green")


@aio
async def test_a_text_line_drawn_without_rich_is_the_line_rich_draws() -> None:
    """One line of text drawn straight to segments (``text_segments``) equals Rich's
    drawing of it, segment for segment, for any runs of styles, the text's own style,
    and any width (an overlong line, a tab or a line break takes Rich's path)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    app = PerftopApp()
    async with app.run_test(size=(80, 24)):
        body = app.query_one("#host QuietStatic")
        lines = Lines(body, (), {})
        base = body.visual_style.rich_style
        seen = {"fast": 0, "rich": 0}

        @settings(max_examples=300, deadline=None)
        @given(
            runs=st.lists(
                st.tuples(
                    st.text("ab █▁é漢", max_size=6),
                    st.sampled_from(STYLE_NAMES),
                ),
                min_size=1,
                max_size=5,
            ),
            own=st.sampled_from(STYLE_NAMES),
            tail=st.sampled_from(["", "", "", "\t", "a\nb"]),
            width=st.integers(1, 80),
        )
        def check(runs: list[tuple[str, str]], own: str, tail: str, width: int) -> None:
            text = Text(style=own)
            for chars, style in [*runs, (tail, "bold")]:
                text.append(chars, style=style or None)
            fast = lines._draw(text, width, base, {})
            assert fast == lines.rich_draw(text, width, base), (runs, own, width)
            seen["rich" if text_segments(text, width, base, app.console.get_style) is None
                 else "fast"] += 1  # fmt: skip

        check()
    assert seen["fast"] >= 30 and seen["rich"] >= 30, seen  # both paths drawn (~1/3, ~2/3)


@aio
async def test_panels_fed_by_a_probe_are_drawn_once_per_probe_tick() -> None:
    """Snapshots come twice a second, the host and process probes once: a snapshot with
    the same host figures and processes as the last draws neither panel again; new ones
    draw both."""
    from dataclasses import replace

    from perftop.tui.widgets.host import HostPanel
    from perftop.tui.widgets.processes import ProcessesPanel

    snaps = [s for s in growing("hogwild.perftop", 14) if s.host.t is not None and s.processes]
    first, later = snaps[-3], snaps[-1]
    assert first.host != later.host and first.processes != later.processes
    app = PerftopApp()
    async with app.run_test(size=(160, 48)) as pilot:
        host, procs = app.query_one(HostPanel), app.query_one(ProcessesPanel)
        drawn: list[str] = []
        real_body, real_first = host.render_body, procs.table.set_first
        host.render_body = lambda s: drawn.append("host") or real_body(s)  # type: ignore[method-assign]
        procs.table.set_first = lambda f: drawn.append("procs") or real_first(f)  # type: ignore[method-assign]
        final = replace(later, hints=())
        for snap in (first, replace(first, hints=()), later, final):
            app.post_message(SnapshotMessage(snap))
            await settle(pilot, 2)
        assert drawn == ["host", "procs", "host", "procs"], drawn
        shown = screen_of(app)
    fresh = PerftopApp()
    async with fresh.run_test(size=(160, 48)) as pilot:
        fresh.post_message(SnapshotMessage(final))
        await settle(pilot)
        assert screen_of(fresh) == shown
