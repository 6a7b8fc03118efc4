"""The monitor's garbage collector is settled once its screen is up (see
perftop/gc_settle.py): start-up's objects (modules, classes, the panels) frozen,
so that a full collection no longer walks them (~65 ms each in the demo, a pause of the
screen too), and the youngest generation collected less often. Run in a process of its
own: the test process itself is never settled (conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

APP = """
import asyncio, gc, json
from perftop import gc_settle
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from tests.tui.fakes import snapshot

async def main():
    app = PerftopApp()
    before = (gc.get_freeze_count(), gc.get_threshold()[0])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        mid = gc.get_freeze_count()
        app.post_message(SnapshotMessage(snapshot()))
        for _ in range(5):
            await pilot.pause()
        after = (gc.get_freeze_count(), gc.get_threshold()[0])
        widgets = list(app.query("*"))
    print(json.dumps({"before": before, "mid": mid, "after": after,
                      "threshold": gc_settle.THRESHOLD0, "widgets": len(widgets)}))

asyncio.run(main())
"""


def test_the_collector_is_settled_once_the_first_snapshot_is_shown() -> None:
    out = subprocess.run(
        [sys.executable, "-c", APP], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["before"] == [0, 700]  # Python's defaults until then
    assert got["mid"] == 0  # not before the panels are built and have shown a snapshot
    frozen, threshold = got["after"]
    assert threshold == got["threshold"] > 700
    # start-up's objects: the modules, Textual and Rich, and every widget
    assert frozen > 20_000 and got["widgets"] > 30
