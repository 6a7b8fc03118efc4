"""Whether the kernel's OOM killer took a process that just ended, measured by counts.

The kernel counts each OOM kill: the host's (``/proc/vmstat`` ``oom_kill``, every one, any
user's) and each memory cgroup's own processes' (v2 ``memory.events``, v1
``memory.oom_control``: whatever killed them). An end is weighed against the count of its
memory cgroup where a probe tick read it, else the host's, from a tick a few seconds
before the end (the OOM killer counts its kill, then its victim frees its memory and
ends). One kill is one victim: the first end with a SIGKILL (or a status its parent
reaped first) after a kill claims it, so the processes that end after it (a training
process's other workers, stopped when one was taken) are not said taken too.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque

# An end is weighed against the OOM kills counted over this long before it: a count taken
# later than the kill would hide it, one from minutes before would blame it for another's
OOM_WINDOW_S = 5.0
HOST = "/proc/vmstat"


def oom_kills(path: str = HOST) -> int | None:
    """The OOM kills counted in ``path``'s ``oom_kill`` line (Linux 4.13: the host's since
    boot, or a memory cgroup's); None where it keeps no such count."""
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class OomCounts:
    """The host's and some cgroups' OOM kill counts at each probe tick (recent ones), and
    the kills each end is weighed against."""

    def __init__(self, read: bool = True) -> None:
        self._lock = threading.Lock()  # ticks come on the probe thread, ends on the watch's
        # (monotonic time, {HOST or a cgroup's file: its count}) at each tick
        self._ticks: deque[tuple[float, dict[str, int | None]]] = deque(maxlen=16)
        self._claimed: dict[str, int] = {}  # counter -> the count its kills were claimed to
        if read:
            self.tick(())

    def tick(self, files: set[str] | tuple[str, ...]) -> None:
        """Read the host's count and each of ``files`` (a job's, as a rule one)."""
        counts = {f: oom_kills(f) for f in (HOST, *files)}
        with self._lock:
            self._ticks.append((time.monotonic(), counts))

    def at_end(self, file: str | None, claim: bool) -> tuple[int | None, str, int | None]:
        """(the OOM kills counted, not claimed by an earlier end, from a tick at least
        ``OOM_WINDOW_S`` before now, or the first tick that read the counter; which counter:
        ``file``'s basename where a tick read it, else "" the host's; the host's kills so
        counted). ``claim``: the end may be a kill's victim (a SIGKILL, an unread status):
        it claims one kill of each counter; else (an exit code, another signal: the OOM
        killer sends SIGKILL only) no kill is its own, 0. None where a count is unread."""
        since = time.monotonic() - OOM_WINDOW_S
        with self._lock:
            if file and (mine := self._since(file, since, claim)) is not None:
                # the host's kill is its too only where its cgroup's was (not another's)
                on_host = self._since(HOST, since, claim and mine > 0)
                return (mine if claim else 0), os.path.basename(file), on_host
            on_host = self._since(HOST, since, claim)
            return (on_host if claim or on_host is None else 0), "", on_host

    def _since(self, key: str, since: float, claim: bool) -> int | None:
        seen = [(t, c[key]) for t, c in self._ticks if c.get(key) is not None]
        now = oom_kills(key)
        if not seen or now is None:
            return None
        before = next((c for t, c in reversed(seen) if t <= since), seen[0][1]) or 0
        base = max(before, self._claimed.get(key, before))
        if claim and now > base:
            self._claimed[key] = base + 1
        return max(0, now - base)
