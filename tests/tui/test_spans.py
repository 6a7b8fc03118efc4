"""The main screen's partial updates fetch only the lines under dirty regions
(``perftop/tui/spans.py``): what they write to the terminal is, byte for byte, what
Textual's own compositor writes for the same dirty regions, through snapshots that change
a few panels or all, new output, a resize, a zoom and notifications over the panels."""

from __future__ import annotations

import dataclasses
import re

from textual._compositor import Compositor

from perftop.model.snapshot import OutputLine
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from perftop.tui.spans import SUPPORTED, SpanCompositor
from tests.tui.fakes import snapshot
from tests.tui.test_app import aio, settle


def test_this_textual_is_supported() -> None:
    assert SUPPORTED  # else the screen draws as Textual does, and these tests test nothing


# A cursor move followed by another, or by the end of its line, writes nothing: Textual's
# own update moves to a chop that starts where a span ends and writes none of it (the chop
# is cut to no cells), where the screen does not fetch that chop's widget at all.
DEAD_MOVE = re.compile(r"\x1b\[\d+;\d+H(?=\x1b\[\d+;\d+H|\n|$)")


def moved(update: str) -> str:
    """What an update writes, less its dead cursor moves."""
    return DEAD_MOVE.sub("", update)


@aio
async def test_partial_updates_write_what_textuals_own_would() -> None:
    app = PerftopApp()
    compared: list[tuple[str, str]] = []
    fetched: list[int] = []
    dirty_lines: list[int] = []
    async with app.run_test(size=(160, 48)) as pilot:
        comp = app.screen._compositor
        assert isinstance(comp, SpanCompositor)

        def both():
            dirty = set(comp._dirty_regions)
            dirty_lines.append(len({y for r in dirty for y in r.line_range}))
            lines = 0
            real = comp._get_renders

            def counted(crop=None):
                nonlocal lines
                for region, clip, strips in real(crop):
                    lines += len(strips)
                    yield region, clip, strips

            comp._get_renders = counted
            ours = SpanCompositor.render_partial_update(comp)  # first: stale lines would show
            del comp._get_renders
            fetched.append(lines)
            comp._dirty_regions.update(dirty)
            theirs = Compositor.render_partial_update(comp)
            if ours is None or theirs is None:
                assert ours is theirs is None
                return None
            compared.append(
                (
                    moved(ours.render_segments(app.console)),
                    moved(theirs.render_segments(app.console)),
                )
            )
            return ours

        comp.render_partial_update = both
        snap = snapshot(output_lines=30)
        for i in range(12):
            out = snap.output + tuple(
                OutputLine(0.0, "stderr" if k % 2 else "stdout", f"line {i}.{k}") for k in range(i)
            )
            host = dataclasses.replace(snap.host, cpu_percent=10.0 + 7 * i)
            snap = dataclasses.replace(
                snapshot(steps=100 + 3 * i), output=out, output_total=30 + i * (i + 1) // 2,
                host=host,
            )  # fmt: skip
            app.post_message(SnapshotMessage(snap))
            if i == 3:
                app.notify("a notice over the panels", timeout=30)
            if i == 5:
                await pilot.resize_terminal(120, 40)
            if i == 7:
                await pilot.press("z")  # the Steps panel alone
            if i == 9:
                await pilot.press("escape")
            await settle(pilot)
    assert len(compared) >= 12
    for ours, theirs in compared:
        assert ours == theirs
    # and it fetched less: a refresh of a few panels does not read the whole screen
    assert min(fetched) < 48
    # nor the lines behind a changed one (its panel's box, the containers, the screen): a
    # snapshot's update fetched 135 lines for 18 that changed, each line once per layer
    ratios = sorted(f / d for f, d in zip(fetched, dirty_lines) if d)
    assert ratios[len(ratios) // 2] < 2, list(zip(fetched, dirty_lines))
