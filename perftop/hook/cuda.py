"""GPU time per step from CUDA events, resolved later by non-blocking ``query()``.

perftop never synchronizes: an event pair is read only once its end event has completed
on the GPU. The span runs from the step's first batch being ready (or the previous step's
end) to the step's end, as the GPU saw them; a GPU kept waiting by the host shows it.
Only active once the process itself has initialized CUDA, so CPU jobs and DataLoader
workers never touch the driver. While a stream is capturing a CUDA graph, no event is
recorded or queried (either would be captured, or invalidate the capture): a step that
overlaps a capture gets no GPU time.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from perftop.events import StepGpu

MAX_PENDING = 256


class CudaTimer:
    def __init__(self, cuda: Any, put: Any, pid: Any) -> None:
        self.cuda = cuda  # torch.cuda, or a fake with the same Event/is_initialized interface
        self.put = put
        self.pid = pid  # callable: the current pid (changes after fork)
        self.pending: deque[tuple[int, Any, Any]] = deque()
        self.start_ev: Any = None
        self.prev_end: Any = None
        self.dropped = 0

    def _record(self) -> Any:
        ev = self.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def _capturing(self) -> bool:
        is_capturing = getattr(self.cuda, "is_current_stream_capturing", None)
        return bool(is_capturing is not None and is_capturing())

    def fetched(self) -> None:
        """The step's first batch is ready: GPU work for this step starts after here."""
        if self.cuda.is_initialized():
            self.start_ev = None if self._capturing() else self._record()

    def closed(self, index: int, t: float) -> None:
        if not self.cuda.is_initialized():
            return
        if self._capturing():  # no span across a capture: the next one starts afresh
            self.start_ev = self.prev_end = None
            return
        end = self._record()
        start = self.start_ev if self.start_ev is not None else self.prev_end
        self.start_ev = None
        self.prev_end = end
        if start is not None:
            self.pending.append((index, start, end))
        self.poll()

    def poll(self) -> None:
        pending = self.pending
        while pending and not self._capturing():
            index, start, end = pending[0]
            if not end.query():
                break
            pending.popleft()
            self.put(StepGpu(self.pid(), index, start.elapsed_time(end) / 1000.0))
        while len(pending) > MAX_PENDING:
            pending.popleft()
            self.dropped += 1


def attach(state: Any, torch: Any) -> CudaTimer | None:
    """A timer for CUDA builds of torch; None on CPU-only builds (zero cost there)."""
    if getattr(torch.version, "cuda", None) is None and getattr(torch.version, "hip", None) is None:
        return None
    timer = CudaTimer(torch.cuda, state.sender.put, lambda: state.sender.pid)
    tracker = state.tracker

    def on_close(index: int, t: float) -> None:
        try:
            timer.closed(index, t)
        except Exception:
            state.internal_error("CUDA timer")

    def on_fetched() -> None:
        try:
            timer.fetched()
        except Exception:
            state.internal_error("CUDA timer")

    tracker.on_close = on_close
    tracker.on_fetched = on_fetched
    return timer
