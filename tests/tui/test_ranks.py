"""The Ranks table: shown only for more than one rank, the straggler marked, rows of
nodes that share a pid kept apart."""

from __future__ import annotations

from perftop.events import Hello, Step
from perftop.model.fleet import FleetSession
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from perftop.tui.widgets import ProcessesPanel, RanksPanel
from perftop.wire import HEADER, Frame, decode_frame, encode_frame, encode_node_frame
from tests.tui.fakes import snapshot
from tests.tui.test_app import aio, settle


def two_nodes_same_pid():
    """Rank 1 (on n2) loads data slowly; rank 0 (on n1) waits for it in backward."""
    s = FleetSession()
    for node, rank, own, bwd in (("n1", 0, 0.002, 0.032), ("n2", 1, 0.032, 0.002)):
        evs = [Hello(1.0, 100, 1, "h", ("t",), rank, rank, 2)] + [
            Step(100, i, 1.0 + i, 1.0 + i + own + bwd, data=own - 0.001, backward=bwd)
            for i in range(10)
        ]
        data = encode_frame(evs)
        s.apply_all(decode_frame(encode_node_frame(node, Frame(0, data[HEADER.size :])))[0])
    return s.snapshot()


@aio
async def test_ranks_table_marks_the_straggler_and_keeps_hosts_apart() -> None:
    app = PerftopApp()
    async with app.run_test(size=(160, 48)) as pilot:
        app.post_message(SnapshotMessage(snapshot()))
        await settle(pilot)
        panel = app.query_one(RanksPanel)
        assert not panel.display  # one process: no ranks table
        app.post_message(SnapshotMessage(two_nodes_same_pid()))
        await settle(pilot)
        assert panel.display and app.query_one("#body").has_class("-ranks")
        table = panel.table
        assert sorted(k.value for k in table.rows) == ["n1:100", "n2:100"]
        assert table.get_cell("n2:100", "rank").plain == "1 ◀ straggler"
        assert table.get_cell("n1:100", "rank").plain == "0"
        assert "rank 1 on n2 makes the others wait" in str(panel.border_subtitle)
        procs = app.query_one(ProcessesPanel).table
        assert sorted(k.value for k in procs.rows) == ["n1:100", "n2:100"]
        assert procs.get_cell("n2:100", "role").plain == "n2 rank 1"
