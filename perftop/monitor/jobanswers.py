"""What others ask of a running :class:`~perftop.monitor.runner.Job`: a viewer attaching
to its socket, ``perftop ls``'s line about it, the ``r`` key's recording. It stands alone
because none of it touches the job's process: it answers from the hub and the socket.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

from perftop.monitor.sinks import SocketSink
from perftop.recording import RecordingWriter

if TYPE_CHECKING:
    from perftop.monitor.hub import Hub
    from perftop.monitor.jobenv import RunConfig
    from perftop.monitor.nosocket import NoServer
    from perftop.monitor.server import Server


class JobAnswers:
    """The Job's answering half (:class:`~perftop.monitor.runner.Job` inherits it)."""

    cfg: RunConfig
    hub: Hub
    server: Server | NoServer
    recorder: RecordingWriter | None
    started_t: float
    if TYPE_CHECKING:  # the Job's own

        @property
        def pid(self) -> int | None: ...

    # -- viewers and `perftop ls` --------------------------------------------------------
    def _viewer(self, conn: socket.socket) -> None:
        self.hub.subscribe(SocketSink(conn))

    def info(self) -> dict[str, Any]:
        """What `perftop ls` shows (answered on the socket's thread, from a snapshot the
        hub takes now)."""
        snap = self.hub.fresh()
        pids = [r.pid for r in snap.roles if r.role != "other"] if snap is not None else []
        return {
            "socket": str(self.server.path),
            "monitor_pid": os.getpid(),
            "command": list(self.cfg.command),
            "job_pid": self.pid,
            "pids": pids,  # trainers and DataLoader workers
            "start_t": self.started_t,
            "steps": snap.steps.count if snap is not None else 0,
            "state": snap.meta.state if snap is not None else "starting",
            "recording": (
                str(self.recorder.path)
                if self.recorder is not None and not self.recorder.closed
                else ""
            ),
            "viewers": self.server.viewers,
        }

    # -- recording -----------------------------------------------------------------------
    def recording(self) -> bool:
        return self.recorder is not None and not self.recorder.closed

    def toggle_recording(self, path: os.PathLike[str] | str | None = None) -> str | None:
        """Stop recording, or start a new recording that begins with the session's header
        and history (so it reports on its own); returns the new path or None."""
        self.recorder = self.hub.toggle_recording(self.recorder, path)
        return str(self.recorder.path) if self.recorder is not None else None
