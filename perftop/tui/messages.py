"""Messages that carry data from perftop's threads into the app.

Threads never touch widgets: the ingest thread posts a :class:`SnapshotMessage` and the
app's own loop renders it. Snapshot messages coalesce, so a busy UI skips to the newest
snapshot instead of falling behind.
"""

from __future__ import annotations

from textual.message import Message

from perftop.model import Snapshot


class SnapshotMessage(Message):
    """A new immutable snapshot of the session."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        # Only the newest snapshot matters; older queued ones are dropped.
        return isinstance(message, SnapshotMessage)


class JobEnded(Message):
    """The job's top process exited (posted once by the controller's watcher)."""

    def __init__(self, exit_code: int, how: str = "") -> None:
        super().__init__()
        self.exit_code = exit_code
        self.how = how or f"exited with code {exit_code}"  # Job.ended_words()


class TerminalLost(Message):
    """perftop's terminal went away (SIGHUP, or a hang-up seen on its descriptors): leave
    a running job running. Posted by :mod:`perftop.tui.terminal_watch`."""


class ReplayStateMessage(Message):
    """Where a replay is now (a :class:`perftop.replay.controller.ReplayState`)."""

    def __init__(self, state: object) -> None:
        super().__init__()
        self.state = state

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReplayStateMessage)


class NoticeMessage(Message):
    """A line for the user from a background thread (a truncated file, a failed jump)."""

    def __init__(self, text: str, severity: str = "warning") -> None:
        super().__init__()
        self.text = text
        self.severity = severity


class StreamEnded(Message):
    """The snapshots' source closed (a collector that stopped): the TUI has nothing left
    to show, so it quits."""


class CaptureNotice(Message):
    """What became of an op capture the ``t`` key asked for (any thread posts it)."""

    def __init__(self, text: str, error: bool = False) -> None:
        super().__init__()
        self.text = text
        self.error = error
