"""The perftop app: wires snapshot messages to the panels, keys to actions.

Rendering lives in the widgets; job control lives behind :class:`Controller` (see
``perftop.flows.run``), so this module only routes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rich.console import RenderableType
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.driver import Driver

from perftop import gc_settle
from perftop.demo import TRAIN_MODULE
from perftop.model import Snapshot
from perftop.model.stands import abnormal_ends, end_words
from perftop.report.comm import hang_words, new_stalls, stall_words, tail_words
from perftop.tui.capture_keys import CaptureKeys
from perftop.tui.driver import sized
from perftop.tui.failure import TuiFailure, failure_of, panic_failure
from perftop.tui.job_input_keys import JobInputKeys
from perftop.tui.messages import JobEnded, SnapshotMessage, StreamEnded, TerminalLost
from perftop.tui.mode import AppMode
from perftop.tui.panel_keys import PanelKeys
from perftop.tui.safe_text import SafeText
from perftop.tui.screens import HelpScreen, QuitScreen, StacksScreen
from perftop.tui.spans import MainScreen
from perftop.tui.widgets import (
    GpuPanel,
    HeaderBar,
    HintsPanel,
    HostPanel,
    OpsPanel,
    OutputPanel,
    Panel,
    ProcessesPanel,
    RanksPanel,
    StacksPanel,
    StepsPanel,
    SyncPanel,
)
from perftop.tui.widgets.footer import KeysFooter

NARROW_BELOW = 120  # columns
THIN_BELOW = 68  # columns: the side column (34) would be wider than the Steps panel
SHORT_BELOW = 40  # rows
TALL_FROM = 60
# The key bar with the command palette's key on its right needs 85 columns; narrower, that
# key is left out (ctrl+p still opens the palette) rather than cutting "t capture".
PALETTE_KEY_FROM = 90


class Controller(Protocol):
    """What the app may ask of the job; ``None`` for a replay or a test."""

    def running(self) -> bool: ...

    def toggle_recording(self) -> str | None: ...

    def capture(self, steps: int, tell: Callable[[str, bool], object]) -> str: ...


class PerftopApp(CaptureKeys, JobInputKeys, PanelKeys, SafeText, App[str | None]):
    """Exits with ``"stop"`` or ``"leave"`` when the user chose so, else ``None``."""

    TITLE = "perftop"
    CSS_PATH = Path(__file__).with_name("perftop.tcss")
    BINDINGS = [
        Binding("q", "request_quit", "quit"),
        Binding("ctrl+c", "request_quit", "quit", show=False, priority=True),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("p", "pause", "pause"),
        Binding("z,enter", "zoom", "zoom"),
        Binding("escape", "unzoom", "unzoom", show=False),
        Binding("s", "sort", "sort"),
        Binding("i", "invert", "invert", show=False),
        Binding("r", "record", "record"),
        Binding("e", "goto_proof", "evidence"),
        Binding("k", "stacks", "stacks", show=False),
        Binding("t", "capture", "capture"),
        Binding("j", "job_input", "input for the job", show=False),
        *[Binding(str(i), f"focus_panel({i - 1})", show=False) for i in range(1, 10)],
    ]

    def get_default_screen(self) -> MainScreen:
        return MainScreen(id="_default")

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, sized by the terminal rather than stale ``COLUMNS``/``LINES``."""
        return sized(super().get_driver_class())

    def __init__(self, controller: Controller | None = None, mode: AppMode = "") -> None:
        """``mode``: "" (a job perftop runs), "viewer" (attached to a session, read-only)
        or "observer" (a process without a hook: stacks replace the job's output)."""
        super().__init__()
        self.controller = controller
        self.mode = mode
        self._stalls: set[tuple[float, int]] = set()  # those notified (new_stalls)
        self._hangs: set[tuple[str, int]] = set()  # collectives whose hang was notified
        self._ended_first = False  # the job's first abnormal end was notified
        self._tails: set[tuple[float, int]] = set()  # stalls said to be work after training
        self.paused = False
        self.latest: Snapshot | None = None
        self.shown: Snapshot | None = None
        self._errors: dict[str, str] = {}
        self._proof = -1  # which hint `e` showed last
        self.failure: TuiFailure | None = None  # set when the app itself failed

    def _handle_exception(self, error: Exception) -> None:
        """Any exception in the app: Textual exits the app (tests still see ``error``),
        but the traceback goes to a file, not the screen; the flow says so in one line
        and fails open (see :mod:`perftop.tui.failure`)."""
        if self.failure is None:
            self.failure = failure_of(error)
        super()._handle_exception(error)
        self._exit_renderables.clear()

    def panic(self, *renderables: RenderableType) -> None:
        """A failure outside the app's code (a driver's thread: the terminal's input read
        failing as it hangs up): as for any failure, one line and a file, and the flow
        fails open; Textual would paint it and return as if the user had quit."""
        if self.failure is None:
            self.failure = panic_failure(renderables)
        super().panic(*renderables)
        self._exit_renderables.clear()

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header", mode=self.mode)
        with Container(id="body"):
            yield StepsPanel(id="steps")
            yield GpuPanel(id="gpu")
            yield HostPanel(id="host")
            yield ProcessesPanel(id="procs")
            yield SyncPanel(id="sync")
            yield HintsPanel(id="hints")
            yield StacksPanel(id="output") if self.mode == "observer" else OutputPanel(id="output")
            yield RanksPanel(id="ranks")  # shown only for more than one rank
            yield OpsPanel(id="ops")  # shown once the session has an op capture
        yield from self.compose_bars()
        yield KeysFooter()

    def compose_bars(self) -> ComposeResult:
        """Lines between the panels and the footer (a replay's timeline and controls)."""
        yield from ()

    def on_mount(self) -> None:
        self._apply_size(self.size.width, self.size.height)
        self.query_one(StepsPanel).focus()
        # Zoom changes (ours, or the screen's own escape binding) switch detail levels.
        self.watch(self.screen, "maximized", self._zoomed, init=False)
        self.watch_job_input()

    def _zoomed(self, _: object) -> None:
        self._apply_size(*self.size)
        if self.shown is not None:  # panels zoomed away were not updated: catch them up
            self.show(self.shown)

    def on_resize(self, event: events.Resize) -> None:
        # The event's size, not ``self.size``: this handler runs before App's own, which is
        # the one that records the new size (a layout for the old size lost three panels).
        self._apply_size(event.size.width, event.size.height)

    def _apply_size(self, width: int, height: int) -> None:
        """Set the layout classes a fresh start at this size gets; the main screen's, also
        while a help or quit screen is on top of it."""
        main = self.screen_stack[0] if self.screen_stack else self.screen
        body = main.query_one("#body")
        narrow, short = width < NARROW_BELOW, height < SHORT_BELOW
        body.set_class(narrow, "-narrow")
        body.set_class(width < THIN_BELOW, "-thin")
        body.set_class(short, "-short")
        body.set_class(height >= TALL_FROM, "-tall")
        zoomed = main.maximized
        for p in main.query(Panel):
            p.set_compact((narrow or short) and p is not zoomed)
        footer = main.query_one(KeysFooter)
        if footer.show_command_palette != (width >= PALETTE_KEY_FROM):
            footer.show_command_palette = width >= PALETTE_KEY_FROM
            footer.refresh(recompose=True)

    # -- data ----------------------------------------------------------------------------
    def on_snapshot_message(self, message: SnapshotMessage) -> None:
        self.latest = message.snapshot
        if not self.paused:
            self.show(message.snapshot)

    def show(self, snap: Snapshot) -> None:
        """Render a snapshot in every panel; a failing panel becomes a notification. One
        that arrives while the app shuts down (its screens gone) is dropped."""
        if self.shown is None:  # the panels are built: start-up's objects are for good
            self.call_after_refresh(gc_settle.settle)
        self.shown = snap
        if not self.screen_stack:
            return
        fresh = new_stalls(snap, self._stalls)
        if fresh:
            s = fresh[-1]
            self.notify(
                f"{stall_words(snap, s)}: stacks captured (k shows them)",
                title="stall",
                severity="warning",
                timeout=8,
            )
        for key, words in tail_words(snap).items():  # once the job has ended well
            if key not in self._tails:
                self._tails.add(key)
                self.notify(words, title="no stall", timeout=12)
        ends = abnormal_ends(snap)  # the first process of the job to die: the cause
        if ends and not self._ended_first:
            self._ended_first = True
            self.notify(end_words(snap, ends[0]), title="ended", severity="error", timeout=30)
        for h in snap.comm.hangs:
            if (h.pg, h.seq) not in self._hangs:
                self._hangs.add((h.pg, h.seq))
                self.notify(hang_words(snap, h), title="desync" if h.desync else "hang",
                            severity="error", timeout=30)  # fmt: skip
        screen = self.screen
        # A panel zoomed away is not drawn: it is not updated either (see _zoomed).
        zoom = self.screen_stack[0].maximized
        panels = [p for p in self.panels if not isinstance(zoom, Panel) or p is zoom]
        targets: list[StacksScreen | HeaderBar | Panel] = [self.query_one(HeaderBar), *panels]
        if isinstance(screen, StacksScreen):
            targets.insert(0, screen)
        for w in targets:
            try:
                w.show(snap)
            except Exception as exc:  # never let a traceback reach the screen
                msg = f"{type(w).__name__}: {type(exc).__name__}: {exc}"
                if self._errors.get(w.id or "") != msg:
                    self._errors[w.id or ""] = msg
                    self.notify(msg, title="display error", severity="error")

    def on_job_ended(self, message: JobEnded) -> None:
        self.notify(f"the job {message.how}; q quits", timeout=8)

    def on_stream_ended(self, message: StreamEnded) -> None:
        self.exit(None)

    def on_terminal_lost(self, message: TerminalLost) -> None:
        self.exit("leave")  # nobody is left to ask: a running job goes on

    # -- actions -------------------------------------------------------------------------
    def action_request_quit(self) -> None:
        if self.controller is None or not self.controller.running():
            self.exit(None)
            return

        def chosen(choice: str | None) -> None:
            if choice is not None:
                self.exit(choice)

        if not isinstance(self.screen, QuitScreen):
            demo = self.latest is not None and TRAIN_MODULE in self.latest.meta.command
            self.push_screen(QuitScreen("stop" if demo else "leave"), chosen)

    def action_stacks(self) -> None:
        if not isinstance(self.screen, StacksScreen):
            self.push_screen(StacksScreen(self.shown))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.query_one(HeaderBar).set_paused(self.paused)
        if not self.paused and self.latest is not None and self.latest is not self.shown:
            self.show(self.latest)

    def action_record(self) -> None:
        if self.controller is None:
            self.notify("recording needs a live job", severity="warning", timeout=3)
            return
        try:
            path = self.controller.toggle_recording()
        except Exception as exc:
            self.notify(str(exc), title="recording", severity="error")
            return
        header = self.query_one(HeaderBar)
        header.recording = path or ""
        if self.shown is not None:
            header.show(self.shown)
        self.notify(f"recording to {path}" if path else "recording stopped", timeout=4)
