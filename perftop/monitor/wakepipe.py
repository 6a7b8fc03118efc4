"""A pipe that ends a thread's ``select()`` at once (to stop it, or to have it look now).

The monitor's threads sleep in ``select()`` until there is work, not on a short timeout:
each wake-up of an idle Python thread costs ~0.3 ms of CPU (its caches are cold), and ten
a second were a third of a percent of a core for one thread.
"""

from __future__ import annotations

import os


class WakePipe:
    def __init__(self) -> None:
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def fileno(self) -> int:
        return self.r

    def wake(self) -> None:
        try:
            os.write(self.w, b"x")
        except OSError:
            pass  # full, or closed: a wake-up is pending already, or nobody waits

    def drain(self) -> None:
        """Take back the wake-ups sent (the woken thread, once it has seen them)."""
        try:
            while os.read(self.r, 64):
                pass
        except OSError:
            pass  # empty (EAGAIN), or closed

    def close(self) -> None:
        for fd in (self.r, self.w):
            if fd >= 0:
                os.close(fd)
        self.r = self.w = -1
