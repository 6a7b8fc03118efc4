"""Quit while the job still runs: stop it, or leave it running (the session goes on in the
background: recording, probing, attachable with `perftop attach`).

Enter takes the focused button, and the focus starts on "Leave running": ``q`` then Enter
out of habit must never stop a training run. The bundled demo's training is perftop's own
and endless: there it starts on "Stop job", so the demo never runs on unseen. ← → move
between the buttons."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from perftop.tui.screens.popup import OnceModal


class QuitScreen(OnceModal[str | None]):
    """Dismisses with ``"stop"``, ``"leave"`` or ``None`` (cancel); ``focus``: the button
    Enter takes at first."""

    def __init__(self, focus: str = "leave") -> None:
        super().__init__()
        self.first = focus

    DEFAULT_CSS = """
    QuitScreen { align: center middle; }
    QuitScreen > Vertical {
        width: 60; max-width: 95%; height: auto;
        border: round $warning; background: $surface; padding: 0 1;
    }
    QuitScreen Horizontal { height: auto; align-horizontal: center; }
    QuitScreen Button { margin: 1 1 0 0; min-width: 10; }
    """
    BINDINGS = [
        Binding("s", "choose('stop')", "stop the job"),
        Binding("l", "choose('leave')", "leave it running"),
        Binding("escape,c,n", "choose(None)", "cancel"),
        Binding("left", "app.focus_previous", "previous button", show=False),
        Binding("right", "app.focus_next", "next button", show=False),
    ]

    def compose(self) -> ComposeResult:
        with Vertical() as v:
            v.border_title = "Quit perftop"
            yield Static(
                "The job is still running.\n"
                "[b]s[/b] stop it (SIGINT, then SIGTERM)   "
                "[b]l[/b] leave it running (recording, attachable)   "
                "[b]esc[/b] cancel"
            )
            with Horizontal():
                yield Button("Stop job", id="stop", variant="error")
                yield Button("Leave running", id="leave", variant="primary")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one(f"#{self.first}", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)

    def action_choose(self, choice: str | None) -> None:
        self.dismiss(choice)
