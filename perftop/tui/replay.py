"""``perftop replay``: the live app and panels, fed from a recording.

The replay controller's thread posts snapshots exactly as the live ingest thread does, so
every panel renders a replay through the same code; this module adds the replay's keys,
its timeline and status line, and the go-to prompt.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding

from perftop.model import Snapshot
from perftop.replay.controller import ReplayController, ReplayState
from perftop.replay.index import ReplayIndex
from perftop.tui.app import PerftopApp
from perftop.tui.messages import NoticeMessage, ReplayStateMessage, SnapshotMessage
from perftop.tui.screens import HelpScreen
from perftop.tui.screens.seek import SeekScreen
from perftop.tui.widgets.replaybar import ReplayBar
from perftop.tui.widgets.timeline import TimelineBar

REPLAY_KEYS = (
    ("space  p", "replay: play / pause"),
    ("[  ]", "replay: slower / faster (0.25× … 64×)"),
    ("a", "replay: as fast as possible (again: back to the speed)"),
    (",  .", "replay: one event back / forward"),
    ("<  >", "replay: one second back / forward"),
    ("←  →", "replay: 5 seconds back / forward (a focused table that scrolls: it scrolls)"),
    ("home  end", "replay: the start / the end of the recording"),
    ("g", "replay: go to a step (1200) or a time since the start (90s, 1:30)"),
    ("n  b  h", "replay: next slow step / between-steps interval / hint change"),
)


# Live keys a replay answers with a line only (record, capture) or that the replay bar
# lists already (p, as space): left out of the key bar, which then fits 80 columns.
UNLISTED = ("pause", "record", "capture")


def _unlisted(bindings: list[Any]) -> list[Any]:
    return [
        replace(b, show=False) if isinstance(b, Binding) and b.action in UNLISTED else b
        for b in bindings
    ]


class ReplayApp(PerftopApp):
    """Live keys keep their meaning (``p`` pauses: here the playback); these are added."""

    BINDINGS = [
        *_unlisted(PerftopApp.BINDINGS),
        Binding("space", "pause", "play/pause", key_display="space", show=False),
        Binding("right_square_bracket", "speed(1)", "faster", key_display="]", show=False),
        Binding("left_square_bracket", "speed(-1)", "slower", key_display="[", show=False),
        Binding("a", "fast", "fastest", show=False),
        Binding("full_stop", "event(1)", "+1 event", show=False),
        Binding("comma", "event(-1)", "-1 event", show=False),
        Binding("greater_than_sign", "seconds(1.0)", "+1 s", show=False),
        Binding("less_than_sign", "seconds(-1.0)", "-1 s", show=False),
        # (not priority: a focused table that can scroll sideways takes them)
        Binding("right", "seconds(5.0)", "+5 s", show=False),
        Binding("left", "seconds(-5.0)", "-5 s", show=False),
        Binding("home", "start", "start", show=False),
        Binding("end", "end", "end", show=False),
        Binding("g", "seek", "go to"),
        Binding("n", "jump('stall')", "next slow step"),
        Binding("b", "jump('between')", "next between", show=False),
        Binding("h", "jump('hint')", "next hint", show=False),
    ]

    def __init__(self, controller: ReplayController | None = None) -> None:
        super().__init__(controller)
        self.replay: ReplayController | None = controller
        self.replay_state: ReplayState | None = None

    def compose_bars(self) -> ComposeResult:
        yield TimelineBar(id="timeline")
        yield ReplayBar(id="replaybar")

    def on_replay_state_message(self, message: ReplayStateMessage) -> None:
        state: ReplayState = message.state  # type: ignore[assignment]
        self.replay_state = state
        self.query_one(TimelineBar).show_state(state)
        self.query_one(ReplayBar).show_state(state)

    def on_notice_message(self, message: NoticeMessage) -> None:
        self.notify(message.text, severity=message.severity, timeout=8)  # type: ignore[arg-type]

    def _send(self, *cmd: object) -> None:
        if self.replay is not None:
            self.replay.command(*cmd)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(REPLAY_KEYS))

    def action_pause(self) -> None:  # p and space: play / pause the replay
        self._send("play")

    def action_speed(self, delta: int) -> None:
        self._send("speed", delta)

    def action_fast(self) -> None:
        self._send("fast")

    def action_event(self, delta: int) -> None:
        self._send("event", delta)

    def action_seconds(self, delta: float) -> None:
        self._send("seconds", delta)

    def action_jump(self, kind: str) -> None:
        self._send("jump", kind)

    def action_start(self) -> None:
        self._send("time", 0.0)

    def action_end(self) -> None:
        self._send("end")

    def action_seek(self) -> None:
        def chosen(target: tuple[str, float] | None) -> None:
            if target is not None:
                self._send(*target)

        self.push_screen(SeekScreen(), chosen)


def make_replay(path: str | Path, *, playing: bool = True) -> tuple[ReplayApp, ReplayController]:
    """The app and its controller, wired; the controller's thread is not started yet.
    Raises :class:`perftop.errors.RecordingError` for a file that cannot be replayed."""
    index = ReplayIndex(path)
    app = ReplayApp()

    def on_update(snap: Snapshot, state: ReplayState) -> None:
        app.post_message(SnapshotMessage(snap))
        app.post_message(ReplayStateMessage(state))

    ctl = ReplayController(
        index, on_update, lambda text: app.post_message(NoticeMessage(text)), playing=playing
    )
    index.start()
    app.controller = app.replay = ctl
    return app, ctl
