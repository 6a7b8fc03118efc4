"""What an op capture costs the training thread: what its steps are compared with (the
steps sent before it), and the steps just after it, while its summary is made.

The summary (reading the profiler's events) and the trace file are made on a thread of their
own, but that thread shares the interpreter with the training one and holds its lock for
much of its time: timm's three steps after a capture took 6.8, 16.5 and 8.1 s against a
3.9 s median. Those steps, from the one after the last captured step to the one in which
the summary and the trace were done, are timed on the training thread and what they took
over the steps before is the capture's too (``CaptureOps.after_s``, ``after_n``).
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import replace
from typing import Any

from perftop.events import CaptureOps

AFTER_WAIT_S = 5.0  # the summary waits this long at least for the step it was done in


class After:
    """The steps after a capture, until the one its summary was done in."""

    def __init__(self) -> None:
        self.steps: list[float] = []  # their durations (seconds)
        self.built = threading.Event()  # the summary and the trace are done (or failed)
        self.counted = threading.Event()  # the step they were done in has ended

    def step(self, t: float, tracker: Any) -> bool:
        """A step after the capture ended at ``t`` (the training thread, its tracker not
        yet reset); True once the step the summary was done in is counted."""
        self.steps.append(t - tracker.start - max(float(tracker.hole), 0.0))
        if self.built.is_set():
            self.counted.set()
            return True
        return False

    def end(self) -> None:
        """No step comes any more (the process exits): the summary waits no more."""
        self.counted.set()

    def counted_in(self, ops: CaptureOps) -> CaptureOps:
        """``ops`` with the steps after it (the summary's thread, once built): waits for
        the step it was done in to end (``AFTER_WAIT_S`` or 5 steps at most; a job that
        stopped stepping has its steps so far counted)."""
        if ops.before_s <= 0:
            return ops  # nothing to compare them with
        self.counted.wait(max(AFTER_WAIT_S, 5 * ops.before_s))
        after = list(self.steps)
        if not after:
            return ops
        return replace(ops, after_s=sum(after) - len(after) * ops.before_s, after_n=len(after))


def baseline(recent: list[tuple[int, float]], first: int, mean2: float) -> tuple[float, int, float]:
    """What a capture's steps are compared with, how many steps it rests on, and their
    spread: the median of the last steps sent before ``first`` (up to
    ``batch.RECENT_STEPS``; two slow steps just before, a save or a busy moment, move it
    little) and 1.4826 times their median absolute deviation (a robust standard
    deviation), else, under 3 of them, the mean of the 2 steps just before (``mean2``, 0.0
    when none) and no spread (0.0)."""
    durations = [d for i, d in recent if i < first]
    if len(durations) >= 3:
        mid = statistics.median(durations)
        mad = statistics.median(abs(d - mid) for d in durations)
        return mid, len(durations), 1.4826 * mad
    return mean2, 2 if mean2 > 0 else 0, 0.0
