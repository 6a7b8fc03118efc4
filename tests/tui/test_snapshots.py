"""Screen snapshots (pytest-textual-snapshot). The clock is frozen: every figure, elapsed
time included, comes from the fixed snapshot in ``fakes``, never from the wall clock.
Update after an intended change with ``pytest tests/tui --snapshot-update`` and look at
the report before committing."""

from __future__ import annotations

from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from tests.tui.fakes import snapshot, with_capture


def show(*keys: str, capture: str = ""):
    """The fake session (with a capture in ``capture``'s state), then ``keys``."""

    async def run_before(pilot) -> None:
        snap = with_capture(snapshot(), capture) if capture else snapshot()
        pilot.app.post_message(SnapshotMessage(snap))
        await pilot.pause()
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
            await pilot.pause()

    return run_before


def test_full_160x48(snap_compare) -> None:
    assert snap_compare(PerftopApp(), terminal_size=(160, 48), run_before=show())


def test_narrow_80x24(snap_compare) -> None:
    assert snap_compare(PerftopApp(), terminal_size=(80, 24), run_before=show())


def test_zoomed_processes_80x24(snap_compare) -> None:
    assert snap_compare(PerftopApp(), terminal_size=(80, 24), run_before=show("4", "z"))


def test_help_160x48(snap_compare) -> None:
    assert snap_compare(PerftopApp(), terminal_size=(160, 48), run_before=show("question_mark"))


def _recorded(name: str, *keys: str):
    """Show a real recording (made with `perftop attach` / `perftop run`), frozen at its
    last event: every figure on screen is one a real run produced."""
    from pathlib import Path

    from perftop.report.build import session_from_file

    path = Path(__file__).parent / "recordings" / name
    return _showing(session_from_file(str(path)).snapshot(), *keys)


def _showing(snap, *keys: str):
    async def run_before(pilot) -> None:
        pilot.app.post_message(SnapshotMessage(snap))
        await pilot.pause()
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
            await pilot.pause()

    return run_before


def test_observer_160x48(snap_compare) -> None:
    app = PerftopApp(mode="observer")
    assert snap_compare(app, terminal_size=(160, 48), run_before=_recorded("observer.perftop"))


def test_stall_stacks_160x48(snap_compare) -> None:
    run_before = _recorded("stall.perftop", "k")
    assert snap_compare(PerftopApp(), terminal_size=(160, 48), run_before=run_before)


def test_zoomed_hints_160x48(snap_compare) -> None:
    """Zoomed, the hints' evidence and advice read in full: lines wrap, never cut."""
    assert snap_compare(PerftopApp(), terminal_size=(160, 48), run_before=show("6", "z"))


def test_zoomed_hints_80x24(snap_compare) -> None:
    assert snap_compare(PerftopApp(), terminal_size=(80, 24), run_before=show("6", "z"))


def test_help_80x24_says_it_scrolls(snap_compare) -> None:
    assert snap_compare(PerftopApp(), terminal_size=(80, 24), run_before=show("question_mark"))


def test_evidence_80x24(snap_compare) -> None:
    assert snap_compare(PerftopApp(), terminal_size=(80, 24), run_before=show("e"))


def test_evidence_160x48(snap_compare) -> None:
    assert snap_compare(PerftopApp(), terminal_size=(160, 48), run_before=show("e"))


def test_hogwild_trainers_160x48(snap_compare) -> None:
    """Two trainers without ranks (hogwild, a real run of tests/workloads/hogwild.py 2 80):
    the Steps panel counts both (160 steps in 2 trainers, 80 + 80), not the first one."""
    run_before = _recorded("hogwild.perftop")
    assert snap_compare(PerftopApp(), terminal_size=(160, 48), run_before=run_before)


def test_hogwild_trainers_80x24(snap_compare) -> None:
    run_before = _recorded("hogwild.perftop")
    assert snap_compare(PerftopApp(), terminal_size=(80, 24), run_before=run_before)


def test_ops_160x48(snap_compare) -> None:
    """A capture done: the Ops panel shares the bottom row with the job's output."""
    assert snap_compare(PerftopApp(), terminal_size=(160, 48), run_before=show(capture="done"))


def test_ops_80x24(snap_compare) -> None:
    """Narrow: the top op of each phase, in the output's place."""
    assert snap_compare(PerftopApp(), terminal_size=(80, 24), run_before=show(capture="done"))


def test_zoomed_ops_80x24(snap_compare) -> None:
    """Zoomed (9 z): the table, grouped by phase."""
    run_before = show("9", "z", capture="done")
    assert snap_compare(PerftopApp(), terminal_size=(80, 24), run_before=run_before)


def test_ops_capturing_and_refused_160x48(snap_compare) -> None:
    """A capture refused after an earlier one: the reason, and the earlier one's ops."""
    run_before = show(capture="refused-after")
    assert snap_compare(PerftopApp(), terminal_size=(160, 48), run_before=run_before)


def _mid_hang(*keys: str):
    """A real 4-rank job on two "nodes" (perftop collect), in a hang
    (tests/tui/collect_hang.py): the Ranks view's collectives and hang line."""
    from tests.tui.collect_hang import mid_hang

    return _showing(mid_hang()[0], *keys)


def test_ranks_hang_160x48(snap_compare) -> None:
    assert snap_compare(PerftopApp(), terminal_size=(160, 48), run_before=_mid_hang())


def test_zoomed_ranks_hang_80x24(snap_compare) -> None:
    """Zoomed (8 z): the rank's collectives, each place that launched them."""
    assert snap_compare(PerftopApp(), terminal_size=(80, 24), run_before=_mid_hang("8", "z"))
