"""A job that reads its terminal under the TUI waits rather than dies (issue 43, item 1):
its ``input()`` blocks on a pipe perftop holds, the app says the job waits for input, its
prompt shows, and ``j`` sends it a line, typed after the box shows or ahead of it in one
burst. A real job, a real pipe, the real app under Pilot."""

from __future__ import annotations

import asyncio
import sys
import time

from textual import events

from perftop.flows.run import LiveController
from perftop.monitor.jobenv import RunConfig
from perftop.monitor.runner import Job
from perftop.tui.app import PerftopApp
from perftop.tui.screens.job_input import JobInputScreen

ASKS = (
    "import sys\n"
    "answer = input('overwrite? [y/N] ')\n"
    "print('got', answer)\n"
    "again = input('sure? ')\n"
    "print('then', again)\n"
    "sys.exit(0 if (answer, again) == ('perftop', 'no') else 5)\n"
)


async def _until(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


def _shown(job: Job) -> list[str]:
    snap = job.hub.latest
    return [line.text for line in snap.output] if snap is not None else []


def _burst(app: PerftopApp, keys: str) -> None:
    """``keys`` as a terminal sends a burst (typed fast, a paste, tmux send-keys): all
    queued at once, none waiting for the screen's answer to the one before."""
    for ch in keys:
        key = "enter" if ch == "\r" else ch
        event = events.Key(key, ch)
        event.set_sender(app)
        app._driver.send_message(event)  # type: ignore[union-attr]


def test_input_in_a_job_gets_the_line_typed_after_j(tmp_path) -> None:
    job = Job(RunConfig(command=(sys.executable, "-c", ASKS), capture_output=True))
    ctl = LiveController(job)
    app = PerftopApp(ctl)
    told: list[str] = []
    app.notify = lambda text, **kw: told.append(text)  # type: ignore[method-assign]
    job.start()

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(ctl.waiting_for_input)  # blocked in input(), not dead of EOFError
            assert job.poll() is None
            await _until(lambda: any("waiting for input" in t for t in told))
            # The prompt, which has no newline, is shown while the job waits on it.
            await _until(lambda: "overwrite? [y/N] " in _shown(job), timeout=10)
            await pilot.press("j")
            await _until(lambda: isinstance(app.screen, JobInputScreen))
            await pilot.press(*"perftop", "enter")
            await _until(lambda: "sure? " in _shown(job))
            # Typed ahead of the box: the letters were lost and the enter sent "".
            _burst(app, "jno\r")
            await _until(lambda: job.poll() is not None)

    try:
        asyncio.run(drive())
    finally:
        if job.poll() is None:
            job.stop()
    assert job.wait() == 0  # the answers arrived: the job exits 0, as at a terminal
    assert _shown(job)[-4:] == ["overwrite? [y/N] ", "got perftop", "sure? ", "then no"]
