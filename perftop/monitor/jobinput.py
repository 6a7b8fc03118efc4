"""The job's stdin under the TUI: a pipe that perftop holds, not ``/dev/null``.

``input()`` (a prompt, ``breakpoint()``) then waits, as it would at a terminal, instead of
dying of ``EOFError``. :meth:`JobInput.reading` tells whether a process of the job is
blocked reading that pipe (Linux ``/proc/PID/syscall``: a ``read`` on fd 0, with fd 0 our
pipe), so the TUI can say so; :meth:`JobInput.send` writes a line the user typed there.
Headless, the job inherits perftop's stdin and none of this is used.
"""

from __future__ import annotations

import os
import platform
from typing import IO

from perftop.probes.procread import descendants

# read(2) and readv(2), by machine: what /proc/PID/syscall's first field says
_READS = {"x86_64": {0, 19}, "aarch64": {63, 65}}.get(platform.machine(), {0, 63})


class JobInput:
    """The write end of the job's stdin pipe (perftop's own)."""

    def __init__(self, pipe: IO[bytes], root_pid: int) -> None:
        self.root = root_pid
        self._fd = pipe.fileno()
        self._pipe = pipe
        os.set_blocking(self._fd, False)  # a job that never reads never blocks the TUI
        self._inode = os.fstat(self._fd).st_ino
        self.closed = False

    def _ours(self, pid: int) -> bool:
        try:
            return os.readlink(f"/proc/{pid}/fd/0") == f"pipe:[{self._inode}]"
        except OSError:
            return False

    def reading(self) -> bool:
        """Whether a process of the job is blocked reading its stdin (our pipe) now."""
        if self.closed:
            return False
        # The job's tree from /proc/PID/task/TID/children: psutil's children() reads every
        # process of the host, ~5 ms a second on the app's thread on a busy machine.
        for pid in descendants(self.root):
            try:
                with open(f"/proc/{pid}/syscall") as f:
                    fields = f.read().split()
            except OSError:
                continue
            if (
                len(fields) > 1
                and fields[0].isdigit()
                and int(fields[0]) in _READS
                and int(fields[1], 16) == 0
                and self._ours(pid)
            ):
                return True
        return False

    def send(self, line: str) -> bool:
        """``line`` and a newline to the job's stdin; False when it cannot take it now
        (gone, or its pipe full)."""
        if self.closed:
            return False
        data = (line.rstrip("\n") + "\n").encode()
        try:
            return os.write(self._fd, data) == len(data)
        except OSError:  # BlockingIOError (full), BrokenPipeError (no reader any more)
            return False

    def close(self) -> None:
        """End of input for the job (EOF at its next read)."""
        if not self.closed:
            self.closed = True
            try:
                self._pipe.close()
            except OSError:
                pass
