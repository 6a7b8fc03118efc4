"""The Ops panel: absent until a capture, then beside the output; `9` focuses it, `s`
sorts its table by the next column, heaviest first."""

from __future__ import annotations

from perftop.tui.messages import SnapshotMessage
from perftop.tui.widgets.ops import OpsPanel
from tests.tui.fakes import snapshot, with_capture
from tests.tui.test_app import aio, settle, showing, text_of


@aio
async def test_the_panel_comes_with_a_capture_and_sorts() -> None:
    async with showing(snapshot()) as (app, pilot):
        ops = app.query_one(OpsPanel)
        body = app.query_one("#body")
        assert not ops.display and not body.has_class("-ops")
        app.post_message(SnapshotMessage(with_capture(snapshot(), "started")))
        await settle(pilot)
        assert ops.display and body.has_class("-ops")
        assert text_of(ops.status).strip() == "capturing steps 1352–1354…"
        assert not ops.table.display  # nothing to list yet
        app.post_message(SnapshotMessage(with_capture(snapshot(), "done")))
        await settle(pilot)
        # grouped by phase in step order, the heaviest op of each first
        names = [str(ops.table.get_row_at(i)[4]) for i in range(ops.table.row_count)]
        assert names[:4] == ["aten::copy_", "aten::stack", "aten::addmm", "aten::gelu"]
        await pilot.press("9", "s")
        await settle(pilot)
        assert app.focused is ops.table and ops.table.sort_column == "self"
        selfs = [ops.table.get_row_at(i)[1].value for i in range(ops.table.row_count)]
        assert selfs == sorted(selfs, reverse=True) and selfs[0] == 0.0195


def test_a_gpu_capture_shows_the_device_split_and_column() -> None:
    import dataclasses

    from perftop.tui.widgets.ops import op_cells, shown, status

    snap = with_capture(snapshot(), "done")
    cap = snap.captures[0]
    part = dataclasses.replace(
        cap.parts[-1], device={"forward": (0.0121, 0.0003, 0.0020), "backward": (0.025, 0.0, 0.004)}
    )
    snap = dataclasses.replace(snap, captures=(dataclasses.replace(cap, parts=(part,)),))
    latest, done = shown(snap)
    lines = status(latest, done).plain.splitlines()
    assert lines[1] == (
        "device/step:  forward 12.1ms kernels 300µs copies 2.0ms idle"
        "  backward 25.0ms kernels 0µs copies 4.0ms idle"
    )
    op = dataclasses.replace(done.ops[0], device_s=0.0188)
    assert [c.plain for c in op_cells(op, True)][4] == "18.8ms"


def test_a_narrow_panel_puts_the_heaviest_op_first_not_the_longest_phase() -> None:
    """The demo's input-bound loop: its data phase is the longest (waiting on workers) and
    its ops the lightest; the two lines of an 80x24 panel must show where compute went."""
    import dataclasses

    from perftop.tui.widgets.ops import summary

    cap = with_capture(snapshot(), "done").captures[0]
    part = cap.parts[-1]
    waiting = dataclasses.replace(part, phase_s={**part.phase_s, "data": 0.2})
    lines = [t.plain.split()[:2] for t in summary(waiting)]
    assert lines[:2] == [["backward", "aten::mm"], ["forward", "aten::addmm"]]
    assert lines[-1][0] == "data"
