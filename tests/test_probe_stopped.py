"""A probe that raises says so in its panel (and why) instead of going quietly stale."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time

from perftop.events import ProbeFailed, ProcSample
from perftop.model import Session
from perftop.probes import ProbeSource
from perftop.probes.host import HostProbe
from perftop.probes.procs import ProcProbe
from perftop.tui.app import PerftopApp
from perftop.tui.messages import SnapshotMessage
from perftop.tui.widgets import HostPanel, ProcessesPanel
from tests.tui.fakes import snapshot
from tests.tui.test_app import text_of


class FlakyProcs(ProcProbe):
    """The real process probe, broken for a few ticks as a psutil bug would break it."""

    def __init__(self) -> None:
        super().__init__(os.getpid())
        self.broken = True

    def sample(self, t: float):
        if self.broken:
            raise OSError(24, "Too many open files")
        return super().sample(t)


def test_failing_probe_is_reported_once_and_cleared_when_it_works_again():
    probe = FlakyProcs()
    got: list = []
    src = ProbeSource(lambda *evs: got.extend(evs), [probe, HostProbe()], 1.0)
    for _ in range(3):
        src.tick()
    failed = [e for e in got if isinstance(e, ProbeFailed)]
    assert [(e.probe, e.reason) for e in failed] == [
        ("procs", "OSError: [Errno 24] Too many open files")
    ]
    session = Session()
    session.apply_all(got)
    snap = session.snapshot()
    assert snap.probe_stopped("procs") == "OSError: [Errno 24] Too many open files"
    assert snap.probe_stopped("host") == ""  # the others go on
    probe.broken = False
    time.sleep(0.01)
    more = src.tick()
    session.apply_all(more)
    assert any(isinstance(e, ProcSample) for e in more)
    assert session.snapshot().probe_stopped("procs") == ""
    probe.broken = True
    session.apply_all(src.tick())  # failing again: said again
    assert session.snapshot().probe_stopped("procs").startswith("OSError")


def test_panels_say_their_probe_stopped_and_why():
    snap = dataclasses.replace(
        snapshot(),
        probes_stopped=(("host", "PermissionError: /proc/stat"), ("procs", "OSError: boom")),
    )

    async def run() -> tuple[str, str, str]:
        app = PerftopApp()
        async with app.run_test(size=(160, 48)) as pilot:
            app.post_message(SnapshotMessage(snap))
            for _ in range(3):
                await pilot.pause()
            procs = str(app.query_one(ProcessesPanel).border_subtitle)
            host = text_of(app.query_one("#host Static"))
            gpu = text_of(app.query_one("#gpu Static"))
            assert isinstance(app.query_one(HostPanel), HostPanel)
            return procs, host, gpu

    procs, host, gpu = asyncio.run(run())
    assert procs == "probe stopped: OSError: boom"
    assert host.startswith("probe stopped: PermissionError: /proc/stat") and "iowait" in host
    assert "probe stopped" not in gpu
