"""The ``j`` key and the notice that the job waits for input (issue 43).

Under the TUI the job's stdin is a pipe perftop holds (see
:mod:`perftop.monitor.jobinput`): ``input()`` waits as at a terminal. Once a second the
app asks its controller whether the job is blocked reading it, and says so once per wait;
``j`` opens a box whose line goes to the job's stdin.
"""

from __future__ import annotations

from typing import Any

from textual import events

from perftop.tui.screens.job_input import JobInputScreen

CHECK_S = 1.0


class JobInputKeys:
    """Mixed into :class:`perftop.tui.app.PerftopApp`."""

    controller: Any
    _input_told = False

    def _input_controller(self) -> Any:
        ctl = self.controller
        return ctl if ctl is not None and hasattr(ctl, "send_input") else None

    def watch_job_input(self) -> None:
        """Start the once-a-second check (from the app's ``on_mount``)."""
        app: Any = self
        if self._input_controller() is not None:
            app.set_interval(CHECK_S, self._check_input)

    def _check_input(self) -> None:
        ctl, app = self._input_controller(), self
        try:
            waiting = bool(ctl.waiting_for_input()) if ctl is not None else False
        except Exception:  # a gone job, /proc unreadable: nothing to say
            waiting = False
        if waiting and not self._input_told:
            app.notify(  # type: ignore[attr-defined]
                "the job is waiting for input on its stdin: j types a line for it",
                title="input",
                severity="warning",
                timeout=30,
            )
        self._input_told = waiting

    def on_key(self, event: events.Key) -> None:
        """A printable key that reaches the app while the ``j`` box is open was typed
        ahead of it (one the box's line takes never gets here): it goes into the box."""
        screen = getattr(self, "screen", None)
        if isinstance(screen, JobInputScreen) and event.is_printable and event.character:
            event.prevent_default()
            event.stop()
            screen.type_ahead(event.character)

    def action_job_input(self) -> None:
        app: Any = self
        ctl = self._input_controller()
        if ctl is None:
            app.notify("only a job perftop runs takes input", severity="warning", timeout=4)
            return
        try:
            waiting = bool(ctl.waiting_for_input())
        except Exception:
            waiting = False
        app.push_screen(JobInputScreen(waiting), self._send_input)

    def _send_input(self, line: str | None) -> None:
        if line is None:
            return
        app: Any = self
        if not self._input_controller().send_input(line):
            app.notify("the job cannot take input now", severity="error", timeout=6)
