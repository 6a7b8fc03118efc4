"""The ``k`` screen: the latest stall's stacks and the stack samples, full size."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding

from perftop.model import Snapshot
from perftop.tui.screens.popup import OnceModal
from perftop.tui.widgets.stacks import StacksPanel


class StacksScreen(OnceModal[None]):
    DEFAULT_CSS = """
    StacksScreen { align: center middle; }
    StacksScreen > StacksPanel { width: 96%; height: 90%; background: $surface; }
    """
    BINDINGS = [Binding("escape,k,q", "dismiss", "back")]

    def __init__(self, snap: Snapshot | None) -> None:
        super().__init__()
        self.snap = snap

    def compose(self) -> ComposeResult:
        yield StacksPanel(id="stacks-full")

    def on_mount(self) -> None:
        if self.snap is not None:
            self.show(self.snap)

    def show(self, snap: Snapshot) -> None:
        self.snap = snap
        panels = self.query(StacksPanel)  # none yet when a snapshot beats the compose
        if panels:
            panels.first().show(snap)
