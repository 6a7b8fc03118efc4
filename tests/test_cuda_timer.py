"""GPU time per step from CUDA events, read with non-blocking query() only.

No GPU here: a fake ``torch.cuda`` with the same interface (Event(enable_timing=True),
record(), query(), elapsed_time(), is_initialized()) stands in. It fails the test if
anything synchronizes.
"""

from __future__ import annotations

from perftop.events import Step, StepGpu
from perftop.hook.cuda import MAX_PENDING, CudaTimer
from perftop.hook.steps import StepTracker
from perftop.model import Session


class FakeCuda:
    """One stream: kernels queue up, an event completes when the GPU reaches it, and the
    test moves the GPU's clock. Any synchronizing call fails the test."""

    def __init__(self) -> None:
        self.initialized = True
        self.capturing = False  # a CUDA graph capture on the current stream
        self.now_ms = 0.0  # how far the GPU has got
        self.queued_ms = 0.0  # when the work queued so far will be done
        self.recorded = 0
        outer = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.done_at: float | None = None

            def record(self) -> None:
                assert not outer.capturing, "an event recorded during a capture joins the graph"
                outer.recorded += 1
                self.done_at = max(outer.queued_ms, outer.now_ms)

            def query(self) -> bool:
                assert not outer.capturing, "query() during a capture invalidates it"
                return self.done_at is not None and self.done_at <= outer.now_ms

            def elapsed_time(self, end: Event) -> float:
                assert self.query() and end.query(), "elapsed_time on a pending event syncs"
                return end.done_at - self.done_at

            def synchronize(self) -> None:  # pragma: no cover - perftop must never call it
                raise AssertionError("perftop synchronized")

        self.Event = Event

    def is_initialized(self) -> bool:
        return self.initialized

    def is_current_stream_capturing(self) -> bool:
        return self.capturing

    def synchronize(self) -> None:  # pragma: no cover
        raise AssertionError("perftop synchronized")

    def launch(self, ms: float) -> None:
        self.queued_ms = max(self.queued_ms, self.now_ms) + ms


def test_gpu_time_is_resolved_later_without_syncing():
    cuda, out = FakeCuda(), []
    timer = CudaTimer(cuda, out.append, lambda: 42)
    tracker = StepTracker(lambda step: None)
    tracker.on_close = timer.closed
    tracker.on_fetched = timer.fetched
    t, opt = 0.0, FakeCuda()  # any weak-referenceable object stands for the optimizer
    for i in range(4):
        tracker.fetched(t, t + 0.01)  # the batch is ready: the step's GPU work starts here
        cuda.launch(5.0 + i)  # its kernels
        tracker.optimizer_pre(opt, t + 0.02)
        tracker.optimizer_post(opt, t + 0.03)
        t += 0.05
        cuda.now_ms += 1.0  # the GPU lags behind the host: nothing is done yet
    assert out == [] and len(timer.pending) == 4  # all four steps wait on the GPU
    cuda.now_ms = 5.0 + 6.0  # the GPU has finished steps 0 and 1 only
    timer.poll()
    assert [(e.pid, e.index, round(e.gpu_s, 6)) for e in out] == [(42, 0, 0.005), (42, 1, 0.006)]
    cuda.now_ms = 100.0
    timer.poll()
    assert [e.index for e in out] == [0, 1, 2, 3]
    assert [round(e.gpu_s, 6) for e in out[2:]] == [0.007, 0.008]


def test_nothing_is_recorded_until_the_job_initializes_cuda():
    cuda, out = FakeCuda(), []
    cuda.initialized = False  # a CPU job, or a DataLoader worker: never touch the driver
    timer = CudaTimer(cuda, out.append, lambda: 1)
    timer.fetched()
    timer.closed(0, 1.0)
    assert cuda.recorded == 0 and out == []


def test_pending_events_are_bounded():
    cuda, out = FakeCuda(), []
    timer = CudaTimer(cuda, out.append, lambda: 1)
    cuda.launch(1e9)  # a GPU that never gets there
    for i in range(MAX_PENDING + 50):
        timer.closed(i, float(i))  # the GPU never finishes
    assert len(timer.pending) == MAX_PENDING and timer.dropped > 0


def test_gpu_times_reach_the_model_after_their_steps():
    s = Session()
    s.apply(Step(7, 0, 1.0, 1.1))
    s.apply(StepGpu(7, 0, 0.08))
    assert s.snapshot().steps.gpu_p50 == 0.08
    assert s.snapshot().steps.recent[-1].gpu == 0.08


def test_no_event_is_recorded_or_queried_while_a_stream_captures():
    cuda, out = FakeCuda(), []
    timer = CudaTimer(cuda, out.append, lambda: 3)
    timer.fetched()
    cuda.launch(2.0)
    timer.closed(0, 1.0)  # step 0: timed, pending on the GPU
    cuda.capturing = True  # e.g. torch.cuda.graph(...) warming up inside step 1
    timer.fetched()
    timer.closed(1, 2.0)
    timer.poll()
    recorded = cuda.recorded
    cuda.capturing = False
    cuda.now_ms = 10.0
    timer.fetched()
    cuda.launch(3.0)
    timer.closed(2, 3.0)
    cuda.now_ms = 100.0
    timer.poll()
    assert recorded == 2  # only step 0's pair: nothing during the capture
    assert [(e.index, round(e.gpu_s, 6)) for e in out] == [(0, 0.002), (2, 0.003)]
