"""The ``t`` key: profile the job's next steps op by op (issue 31).

The app's :class:`~perftop.tui.app.Controller` asks (a live job's hub, an attached
viewer's control connection when started with ``--allow-control``; a replay cannot) and
says what became of the capture later, from another thread, through a
:class:`CaptureNotice` message.
"""

from __future__ import annotations

from typing import Any

from perftop.tui.messages import CaptureNotice

CAPTURE_STEPS = 3  # what `t` asks for


class CaptureKeys:
    """Mixed into :class:`perftop.tui.app.PerftopApp`."""

    controller: Any

    def action_capture(self) -> None:
        app: Any = self
        if self.controller is None:
            app.notify("an op capture needs a live job", severity="warning", timeout=4)
            return
        try:
            text = self.controller.capture(CAPTURE_STEPS, self._capture_told)
        except Exception as exc:
            app.notify(str(exc), title="capture", severity="error")
            return
        if text:
            app.notify(text, title="capture", timeout=4)

    def _capture_told(self, text: str, error: bool) -> None:
        app: Any = self
        app.post_message(CaptureNotice(text, error))  # from the hub's or a control thread

    def on_capture_notice(self, message: CaptureNotice) -> None:
        severity = "error" if message.error else "information"
        app: Any = self
        app.notify(message.text, title="capture", severity=severity, timeout=12)
