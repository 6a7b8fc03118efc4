"""Kineto prints a line on the process's stderr (fd 2) at each profiler start and stop,
whatever its log level: a capture must not add lines to the job's output."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any


def quiet_stderr() -> Any:
    """Kineto prints a line on fd 2 at each profiler start and stop: catch fd 2 in a pipe
    around the call and put back whatever else was written there meanwhile."""
    return _Quiet()


class _Quiet:
    def __enter__(self) -> _Quiet:
        self.saved = -1
        try:
            sys.stderr.flush()
            self.r, w = os.pipe()
            os.set_blocking(self.r, False)
            self.saved = os.dup(2)
            os.dup2(w, 2)
            os.close(w)
        except Exception:
            self.saved = -1
        return self

    def __exit__(self, *exc: object) -> None:
        if self.saved < 0:
            return
        os.dup2(self.saved, 2)
        os.close(self.saved)
        data = b""
        try:
            while chunk := os.read(self.r, 65536):
                data += chunk
        except BlockingIOError:
            pass
        os.close(self.r)
        kept = b"".join(
            line
            for line in data.splitlines(keepends=True)
            if not (line.startswith(b"USDT:") and b"profiler_st" in line)
        )
        if kept:
            threading.Thread(target=os.write, args=(2, kept), daemon=True).start()
