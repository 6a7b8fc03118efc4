"""The stand-in for the socket server when perftop cannot serve one (no directory where a
socket's path fits, a directory it may not use): the job runs all the same, without the
hook, and one line says why (see :meth:`perftop.monitor.runner.Job.start`). It has the
server's interface, holding nothing: no hook connects, no viewer attaches, nothing is
captured; the probes, the output and the recording go on."""

from __future__ import annotations

from pathlib import Path


class NoServer:
    """What :class:`perftop.monitor.server.Server` offers, with nobody to serve."""

    serving = False

    def __init__(self, reason: str) -> None:
        self.reason = reason  # why there is no socket, for the one line
        self.path = Path("")  # no socket: attach and `perftop ls` cannot find this session
        self.rejected_frames = 0
        self.closed_streams = 0
        self.refused_peers = 0
        self.connections = 0
        self.viewers = 0
        self.peer_pids: set[int] = set()
        self.job_pids: set[int] = set()

    @property
    def open_connections(self) -> int:
        return 0

    def settle(self, timeout: float = 0.0) -> None:
        pass

    def line(self) -> str:
        return (
            f"cannot serve a socket ({self.reason}): the job runs without perftop's hook "
            "(no steps; not attachable)"
        )

    def start(self) -> NoServer:
        return self

    def send_to_trainers(self, data: bytes) -> list[int]:
        return []

    def pause(self) -> None:
        pass

    def close(self) -> None:
        pass
