"""What the hub says when it cuts off a subscriber that failed (a full recording disk, a
viewer's or a forwarder's bug, a snapshot subscriber that raised): one line each, never
a traceback, and the session goes on.

The line is kept (``problems``: printed after a TUI), submitted as an error
:class:`~perftop.events.Note` (the Hints panel, viewers, reports; one from ``recording``
turns the header's ``rec`` off) and handed to ``on_problem`` (headless: stderr at once).
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable
from typing import Any

from perftop.events import Note
from perftop.recording import RecordingWriter


class CutOffs:
    def __init__(
        self,
        submit: Callable[[Note], object],
        on_problem: Callable[[str], object] | None,
        steps: Callable[[], int],
    ) -> None:
        self.submit = submit
        self.on_problem = on_problem
        self.steps = steps  # the session's step count, at the failure
        self.problems: list[str] = []

    def call(self, direct: list[Any], sink: Any, fn: Callable[..., object], *args: Any) -> bool:
        """``fn(*args)`` of ``sink``, one of the hub's in-line sinks ``direct``; when it
        raises, ``sink`` leaves ``direct``, is closed (quietly) and said; False."""
        try:
            fn(*args)
            return True
        except Exception as exc:
            if sink in direct:
                direct.remove(sink)
            with contextlib.suppress(Exception):
                sink.close()
            self.sink(sink, exc, self.steps())
            return False

    def let_go(self, buffered: list[Any]) -> None:
        """Remove from ``buffered`` each :class:`BufferedSink` whose thread failed."""
        for b in list(buffered):
            if b.failed is not None:
                buffered.remove(b)
                self.buffered(b.sink, b.failed)

    def sink(self, sink: Any, exc: BaseException, steps: int) -> None:
        """An event sink written in line (the recording, a forwarder) raised."""
        if isinstance(sink, RecordingWriter):
            why = "disk full" if sink.error == os.strerror(errno.ENOSPC) else sink.error
            self.say(
                f"recording stopped at step {steps} ({why or _why(exc)}): {sink.path} "
                "keeps what was written; the session goes on unrecorded",
                source="recording",
            )
        else:
            self.say(f"{_name(sink)} failed at step {steps} ({_why(exc)}) and was cut off")

    def buffered(self, sink: Any, exc: BaseException) -> None:
        """A buffered sink's thread stopped on an error; a viewer that left says nothing."""
        if not isinstance(exc, (ConnectionError, TimeoutError)):
            self.say(f"{_name(sink)} failed ({_why(exc)}) and was cut off")

    def subscriber(self, fn: Any, exc: BaseException) -> None:
        self.say(f"{_name(fn)} failed ({_why(exc)}) and was cut off")

    def say(self, text: str, source: str = "monitor") -> None:
        self.problems.append(text)
        self.submit(Note(time.time(), "error", source, text))
        if self.on_problem is not None:
            try:
                self.on_problem(text)
            except Exception:
                pass


def _name(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or type(obj).__name__


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
