"""Keep recording after the TUI quits with "leave it running".

The job lives in its own session, so it survives the TUI. This small detached process
takes over the monitor's socket path (the hooks' senders reconnect to it with backoff),
appends to the same recording and exits once the job's top process is gone. Run as
``python -m perftop.monitor.background --socket PATH --append FILE --pid PID``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from perftop.events import JobExit, Note
from perftop.model import Session
from perftop.monitor.ingest import Ingest
from perftop.monitor.server import Server
from perftop.recording import RecordingWriter

POLL_S = 0.5
DRAIN_S = 3.0


def spawn(socket_path: str | os.PathLike[str], record: str | os.PathLike[str], pid: int) -> int:
    """Start the background recorder, detached from our terminal and session."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "perftop.monitor.background",
            "--socket",
            str(socket_path),
            "--append",
            str(record),
            "--pid",
            str(pid),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return proc.pid


def alive(pid: int) -> bool:
    """The job's top process still runs; a zombie (its parent has not reaped it yet) is
    gone for our purpose."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def record_until_exit(socket_path: Path, record: Path, pid: int) -> None:
    rec = RecordingWriter(record, append=True)
    ingest = Ingest(Session(), rec).start()
    try:
        socket_path.unlink()
    except OSError:
        pass
    server = Server(ingest.submit_frame, path=socket_path).start()
    ingest.submit(Note(time.time(), "info", "background", "recording continued in background"))
    while alive(pid):
        time.sleep(POLL_S)
    deadline = time.monotonic() + DRAIN_S
    while server.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    # Not our child: how it ended cannot be known here, only that it did.
    ingest.submit(JobExit(time.time(), pid, 0, known=False))
    server.close()
    ingest.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="perftop-background")
    ap.add_argument("--socket", required=True, type=Path)
    ap.add_argument("--append", required=True, type=Path)
    ap.add_argument("--pid", required=True, type=int)
    a = ap.parse_args(argv)
    try:
        record_until_exit(a.socket, a.append, a.pid)
    except Exception:  # detached: nobody to tell; the recording simply ends here
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
