"""A process's figures over its latest samples: its private memory's steady growth, and
its wait for a core.

The wait for a core is the share of wall time its main thread (a training process's
training thread, where that is another) was runnable but not running (the kernel's
run-queue delay, which the process probe reads as a counter from ``/proc/PID/schedstat``),
over the latest :data:`WAIT_SPAN_S` and over all the time it was seen since the probe
last began to read another thread. On a host whose cores other work holds, that is time the training loop stood
still without waiting for anything of its own: its CPU share alone cannot tell that from a
loop that waits on data or the GPU.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

GROWTH_SPAN_S = 15.0  # private memory's growth rate is fitted over this much of the latest samples
GROWTH_MIN_SPAN_S = 5.0  # ... once they span at least this long
GROWTH_MIN_SAMPLES = 5
GROWTH_R2 = 0.8  # a fit this good is steady growth; a worker that comes and goes is not
WAIT_SPAN_S = 10.0  # the latest share is over this much of the latest samples
WAIT_MIN_S = 2.0  # ... once they span this long: a share over less is none


class CoreWait:
    __slots__ = ("recent", "first", "tid")

    def __init__(self) -> None:
        self.recent: deque[tuple[float, float]] = deque()  # (t, seconds waited so far)
        self.first: tuple[float, float] | None = None
        self.tid: int | None = None  # the thread the counter is of (None: the main thread)

    def add(self, t: float, waited: float | None, tid: int | None = None) -> None:
        """A probe tick's counter (None: not kept by this kernel, nothing added), of thread
        ``tid`` (None: the main thread): another thread's counter starts afresh."""
        if waited is None:
            return
        recent = self.recent
        # another thread's counter, or one that went back (another process's, or a damaged
        # row): afresh
        if tid != self.tid or (recent and (waited < recent[-1][1] or t <= recent[-1][0])):
            self.tid = tid
            recent.clear()
            self.first = None
        recent.append((t, waited))
        if self.first is None:
            self.first = (t, waited)
        while len(recent) > 2 and recent[1][0] <= t - WAIT_SPAN_S:
            recent.popleft()

    def share(self) -> float | None:
        """The latest share of wall time spent waiting for a core, 0..1."""
        if not self.recent:
            return None
        return _share(self.recent[0], self.recent[-1])

    def share_avg(self) -> float | None:
        """The share over all the time it was seen (since the counter last went back)."""
        if self.first is None or not self.recent:
            return None
        return _share(self.first, self.recent[-1])


def _share(a: tuple[float, float], b: tuple[float, float]) -> float | None:
    dt = b[0] - a[0]
    if dt < WAIT_MIN_S:
        return None
    return round(min(1.0, max(0.0, (b[1] - a[1]) / dt)), 4)


def steady_growth(samples: Sequence[tuple[float, int]]) -> float | None:
    """Bytes a second by which a process's private memory grows, where it grows steadily:
    a least-squares line through the latest samples (``GROWTH_SPAN_S``) that fits them
    (R² ≥ ``GROWTH_R2``); None over too few samples or too short a span, and for a flat or
    jumpy series."""
    n = len(samples)
    if n < GROWTH_MIN_SAMPLES or samples[-1][0] - samples[0][0] < GROWTH_MIN_SPAN_S:
        return None
    mt = sum(t for t, _ in samples) / n
    mv = sum(v for _, v in samples) / n
    stt = sum((t - mt) ** 2 for t, _ in samples)
    svv = sum((v - mv) ** 2 for _, v in samples)
    if stt <= 0.0 or svv <= 0.0:
        return None
    stv = sum((t - mt) * (v - mv) for t, v in samples)
    slope = stv / stt
    if slope <= 0.0 or stv * stv / (stt * svv) < GROWTH_R2:
        return None
    return slope
