"""The TUI in a process of its own, fed snapshots through a pipe (``perftop collect``).

A collector's ingest and fleet snapshots keep most of a core busy in Python; a TUI under
the same GIL answers keys late. Here the collector's process keeps the sources, the model,
the recording and the exporters, and this module's child only draws: it shares the
terminal (the child takes it over as any full-screen program does), quits on ``q`` like
the in-process TUI, and quits by itself when the collector closes the pipe.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perftop import gc_settle
from perftop.model import Snapshot
from perftop.monitor.snapshot_pipe import SnapshotSender, read_snapshots

if TYPE_CHECKING:
    from textual.app import App

# The child finds this perftop wherever it runs from (a checkout too), after what the
# interpreter has on its path: appended, so that it shadows nothing.
BOOT = "import sys; sys.path.append(sys.argv.pop(1)); from perftop.tui.process import main; main()"
CHILD = (sys.executable, "-c", BOOT, str(Path(__file__).resolve().parents[2]))
CLOSE_S = 5.0  # for the child to leave the screen once the pipe closes, before it is killed


class TuiProcess:
    """The parent's side: start the child, post snapshots to it, close it."""

    def __init__(self, command: Sequence[str] = CHILD, **popen: Any) -> None:
        """``command`` and ``popen`` for a TUI other than perftop's own (the fleet
        benchmark's, which times keys); the pipe's descriptor is its last argument."""
        r, w = os.pipe()
        try:
            self.proc = subprocess.Popen([*command, str(r)], pass_fds=(r,), **popen)
        except BaseException:
            os.close(w)
            raise
        finally:
            os.close(r)
        self.sender = SnapshotSender(w)

    def post(self, snap: Snapshot) -> None:
        """Any thread; never waits (only the newest snapshot waiting is sent)."""
        self.sender.send(snap)

    def running(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> int:
        """End the stream, so the child quits; killed if it has not within ``CLOSE_S``."""
        self.sender.close(CLOSE_S)
        try:
            return self.proc.wait(CLOSE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def feed(app: App[Any], fd: int) -> threading.Thread:
    """Post each snapshot read from ``fd`` to ``app``, then :class:`StreamEnded`."""
    from perftop.tui.messages import SnapshotMessage, StreamEnded

    # The modules, classes and constants loaded by now are never garbage: a full
    # collection need not scan them again (at 512 ranks one took up to 90 ms, a key's wait).
    gc_settle.settle()

    def loop() -> None:
        try:
            for snap in read_snapshots(fd):
                app.post_message(SnapshotMessage(snap))
        except Exception:  # a broken stream ends the view as a closed one does
            pass
        app.post_message(StreamEnded())

    t = threading.Thread(target=loop, name="perftop-snapshots", daemon=True)
    t.start()
    return t


def main(argv: list[str] | None = None) -> int:
    """The child (``python -m perftop.tui.process FD`` does the same)."""
    from perftop.tui.app import PerftopApp

    fd = int((sys.argv[1:] if argv is None else argv)[0])
    app = PerftopApp()
    feed(app, fd)
    app.run()
    if app.failure is not None:  # one line, its traceback in a file; the collector goes on
        from perftop.console import say

        say(app.failure.line)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
