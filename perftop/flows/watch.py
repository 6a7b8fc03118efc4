"""What every flow that watches a session shares: its options, the TUI or a headless
wait, and a viewer's controller (quit detaches, ``r`` records what is seen)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from perftop.console import interactive
from perftop.monitor.hub import Hub
from perftop.recording import RecordingWriter

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
ViewMode = Literal["viewer", "observer"]  # a session perftop did not start, or a bare process


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """How a session is watched, whatever its source (a local session, a process, ssh)."""

    headless: bool = False  # no TUI: wait, then print a summary
    duration_s: float | None = None  # stop watching after this long
    refresh_s: float = 0.5  # the TUI's refresh interval
    record: Path | None = None  # record what is seen
    force: bool = False  # overwrite that recording
    allow_control: bool = False  # an attached viewer may ask for op captures (`t`)


def wants_tui(opts: WatchOptions) -> bool:
    """The TUI only on a terminal, and only when not asked to run headless."""
    return not opts.headless and interactive()


def record(hub: Hub, opts: WatchOptions) -> RecordingWriter | None:
    """The recording ``opts`` asks for, subscribed to ``hub`` (None: none asked)."""
    return hub.record(opts.record, force=opts.force) if opts.record is not None else None


def show(hub: Hub, source: Any, opts: WatchOptions, mode: ViewMode) -> None:
    """The TUI over ``hub`` until the user quits (or ``opts.duration_s`` passes)."""
    from perftop.tui.app import PerftopApp
    from perftop.tui.messages import SnapshotMessage

    control = getattr(source, "path", None) if opts.allow_control else None
    app = PerftopApp(ViewerController(hub, str(control) if control else None, mode), mode=mode)
    hub.snapshot_subscribers.append(lambda s: app.post_message(SnapshotMessage(s)))
    if opts.duration_s is not None:
        threading.Timer(opts.duration_s, lambda: app.call_from_thread(app.exit, None)).start()
    run_viewer(app)


def run_viewer(app: Any) -> None:
    """Run a viewer's app (:class:`perftop.tui.app.PerftopApp`); a failure of its own
    raises :class:`perftop.errors.ScreenFailed` (one line, a non-zero exit)."""
    from perftop.tui.failure import failure_of

    try:
        app.run()
    except Exception as exc:
        if app.failure is None:
            app.failure = failure_of(exc)
    if app.failure is not None:
        raise app.failure.error()


def wait(source: Any, duration_s: float | None, gone: threading.Event | None = None) -> None:
    """Until the source ends, the duration passes, or the stream's reader is ``gone``."""
    end = None if duration_s is None else time.monotonic() + duration_s
    while not source.ended.is_set() and not (gone is not None and gone.is_set()):
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            return
        source.ended.wait(0.5 if left is None else min(0.5, left))


def wait_until(
    duration_s: float | None,
    done: Callable[[], bool] | None = None,
    signals: tuple[signal.Signals, ...] = STOP_SIGNALS,
) -> None:
    """Until the duration has passed, ``done()`` holds, or one of ``signals`` asks to stop
    (one the process ignores, as under ``nohup``, stays ignored)."""
    stop = threading.Event()
    old = {s: h for s in signals if (h := signal.getsignal(s)) is not signal.SIG_IGN}
    for s in old:
        signal.signal(s, lambda *_: stop.set())
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        while not stop.wait(0.2):
            if deadline is not None and time.monotonic() >= deadline:
                break
            if done is not None and done():
                break
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class ViewerController:
    """A viewer never changes the job: quitting detaches; ``r`` records what is seen."""

    def __init__(self, hub: Hub, control: str | None = None, mode: str = "viewer") -> None:
        """``control``: the session's socket, where ``t`` may ask for a capture (attach
        ``--allow-control``); None keeps the viewer read-only."""
        self.hub = hub
        self.rec: RecordingWriter | None = None
        self.control = control
        self.mode = mode

    def running(self) -> bool:
        return False  # nothing to stop: quit simply detaches

    def toggle_recording(self) -> str | None:
        self.rec = self.hub.toggle_recording(self.rec)
        return str(self.rec.path) if self.rec is not None else None

    def capture(self, steps: int, tell: Callable[[str, bool], object]) -> str:
        from perftop.flows.trace import ask_in_background

        if self.mode == "observer":
            return "a process observed from outside has no hook: it cannot capture ops"
        if self.control is None:
            return "this viewer is read-only: attach with --allow-control to capture ops"
        return ask_in_background(self.control, steps, "attach", tell)
