"""On-demand op capture in the job: ``torch.profiler`` over the next N whole steps.

The monitor's :class:`CaptureAsk` arrives on the sender's thread (see ``sender.py``), which
puts it in ``pending`` and points the step tracker's ``on_step`` at :meth:`Captures.boundary`
(the sync detector's callback, if any, still runs from there when it is due). Nothing of
this module is loaded and no profiler runs until an ask arrives; once
the capture is over, ``on_step`` is the detector's again.

On the training thread, at step boundaries: the first one after the ask notes dynamo's
compile counter; the next refuses if torch.compile compiled during the step between (a
job that recompiles every step is never captured), if dynamo is tracing, a CUDA graph is
being captured or a profiler of the job's own is on; else it starts the profiler for
exactly ``steps`` whole steps, and the boundary after the last one stops it. Reading the
profiler's events, building the summary and writing the trace happen on a thread of their
own (``capture_ops.py``). The sync detector starts no watch while ``state.capturing``.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import Any

from perftop.events import CaptureAsk, CaptureState

MAX_STEPS = 50
SUMMARY_EXIT_S = 2.0  # the most an exit waits for a summary in the making
WAIT_S = 30.0  # an ask that no step boundary took by then is refused (a process not training)


class Captures:
    """One per hook; at most one capture at a time."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.pending: deque[CaptureAsk] = deque()  # popped by whichever thread claims it
        self.asked_at = 0.0
        self.inner: Any = None  # the tracker's on_step before ours (the sync detector's)
        self.inner_next = 0
        self.armed: tuple[int, int] | None = None  # (index, dynamo frames) at the first boundary
        self.before: list[float] = []  # durations of the steps just before the capture
        self.run: Any = None  # the running capture (capture_ops.Run)
        self.last: Any = None  # the last one stopped (its summary may be in the making)
        self.after: Any = None  # the last one, while the steps after it are counted
        self.busy = False  # a capture is running or its summary is being built

    # -- the sender's thread ------------------------------------------------------------
    def ask(self, ask: CaptureAsk) -> None:
        if self.busy or self.pending:
            self._answer(ask, "refused", "a capture is already running in this process")
            return
        self.busy = True
        self.armed = None
        self.before = []
        self.asked_at = time.monotonic()
        self.state.capturing = True  # the sync detector starts no watch from now on
        self.pending.append(ask)
        self._install()

    def _install(self) -> None:
        tracker = self.state.tracker
        if tracker.on_step != self.boundary:
            self.inner = tracker.on_step
            self.inner_next = tracker.step_hook_at
            tracker.on_step = self.boundary
        tracker.step_hook_at = 0

    def tick(self) -> None:
        """Each sender wake: an ask not taken in WAIT_S is refused; else make sure the next
        boundary calls us (the training thread may have written its own ``step_hook_at``
        over ours as we set it)."""
        if not self.pending:
            return
        if time.monotonic() - self.asked_at > WAIT_S:
            try:
                ask = self.pending.popleft()
            except IndexError:
                return
            self._answer(ask, "refused", f"no training step ended within {WAIT_S:.0f} s")
            self._done()
            return
        self._install()

    # -- the training thread: the tracker's on_step ---------------------------------------
    def boundary(self, index: int, t: float) -> int:
        tracker = self.state.tracker
        try:
            if self.inner is not None and index >= self.inner_next:
                self.inner_next = self.inner(index, t) or 0
            run = self.run
            if run is not None:
                run.boundary(index, t, tracker)
                if run.finished():
                    self.run, self.last, self.after = None, run, run
                    run.stop_and_summarize(self._done)
                    # The profiler is off: the detector may watch again while the summary
                    # is built on its own thread (a long trace would keep it aside).
                    self.state.capturing = False
                    return self._restore()
                return index + 1
            after = self.after
            if after is not None and after.after.step(t, tracker):
                self.after = None
            if self.pending:
                self._pending(index, t, tracker)
            return self._restore()
        except Exception:
            self.state.internal_error("op capture")
            self.run = self.after = None
            self.pending.clear()
            self._done()
            return self._restore()

    def _pending(self, index: int, t: float, tracker: Any) -> None:
        self.before.append(t - tracker.start - tracker.hole)
        frames = _dynamo_frames()
        if self.armed is None:
            self.armed = (index, frames)
            return
        try:
            ask = self.pending.popleft()
        except IndexError:
            return  # refused on the sender's thread just now
        reason = refusal(frames != self.armed[1])
        if reason:
            self._answer(ask, "refused", reason)
            self._done()
            return
        from perftop.hook.capture_cost import baseline
        from perftop.hook.capture_ops import Run

        mean2 = sum(self.before[-2:]) / len(self.before[-2:])
        # Read now: the steps sent so far are all before the capture (later, the captured
        # ones and those after push them out of the sender's short memory).
        before = baseline(list(self.state.sender.recent), index + 2, mean2)
        run = Run(self.state, ask, min(max(1, ask.steps), MAX_STEPS), index + 2, before)
        error = run.start()
        if error:
            self._answer(ask, "failed", error)
            self._done()
            return
        self.run = run
        self._answer(ask, "started", "", run.first, run.steps)

    def abort(self) -> None:
        """At the process's exit: a profiler left running there crashes the interpreter's
        teardown (SIGSEGV in torch's Python tracer); stop it, say so."""
        run, self.run = self.run, None
        if run is not None:
            run.abort()
            self._answer(run.ask, "failed", "the process exited during the capture")
            self._done()
        if self.last is not None:
            self.last.after.end()  # no step comes any more: the summary goes on
        thread = getattr(self.last, "thread", None)
        if thread is not None and thread.is_alive():
            thread.join(SUMMARY_EXIT_S)  # torch's objects must not be read during teardown

    def _restore(self) -> int:
        """Hand on_step back (to the detector, or to nobody) when nothing is under way."""
        tracker = self.state.tracker
        if self.pending or self.run is not None or self.after is not None:
            return tracker.index + 1
        if tracker.on_step == self.boundary:
            tracker.on_step = self.inner
        return self.inner_next if self.inner is not None else 0

    def _done(self) -> None:
        self.armed = None
        self.busy = False
        self.state.capturing = False

    def _answer(
        self, ask: CaptureAsk, state: str, reason: str, first: int = -1, steps: int = 0
    ) -> None:
        s = self.state.sender
        # urgent: someone waits for it (`perftop trace`, the TUI's capture line)
        s.put(
            CaptureState(time.time(), s.pid, ask.capture_id, state, reason, first, steps),
            urgent=True,
        )


def _dynamo_frames() -> int:
    """How many frames dynamo has compiled so far (0 when it was never imported)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0
    try:
        return int(sum(utils.counters.get("frames", {}).values()))
    except Exception:
        return 0


def refusal(compiled_last_step: bool) -> str:
    """Why a capture must not start now ("" when it may), on the training thread."""
    torch = sys.modules.get("torch")
    if torch is None:
        return "torch is not imported in this process"
    if compiled_last_step:
        return "torch.compile compiled during the last step (it would time the compiler)"
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and getattr(compiler, "is_compiling", lambda: False)():
        return "torch.compile is tracing or compiling"
    try:
        if torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing():
            return "a CUDA graph is being captured"
    except Exception:
        pass
    try:
        if torch._C._autograd._profiler_enabled():
            return "the job runs a profiler of its own"
    except Exception:
        pass
    return ""
