"""Step history per training process: compact arrays for whole-run figures, a deque of
recent rows for charts, a bounded window for live percentiles."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from math import copysign

from perftop.events import Step, StepGpu
from perftop.model.snapshot import StepRow, StepStats
from perftop.model.stats import percentile

RECENT_ROWS = 240
LIVE_WINDOW = 1000
# Upper bounds (seconds) of the whole-run step-time histogram; a last bucket holds the rest.
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class StepSeries:
    """All steps of one process. Appending is O(1); a snapshot costs O(window)."""

    __slots__ = (
        "pid",
        "durations",
        "data",
        "backward",
        "optimizer",
        "recent",
        "gpu",
        "first_t0",
        "last_t1",
        "gap_kind",
        "hist",
        "total",
        "binned",
        "unseen_at",
    )

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.durations = array("d")
        self.data = array("d")
        self.backward = array("d")
        self.optimizer = array("d")
        self.recent: deque[StepRow] = deque(maxlen=RECENT_ROWS)
        self.gpu: dict[int, float] = {}
        self.first_t0: float | None = None
        self.last_t1: float | None = None
        self.gap_kind = ""  # time outside training steps came before the next step
        self.hist = [0] * (len(STEP_BUCKETS) + 1)
        self.total = 0.0
        self.binned = 0  # durations already counted in hist/total (binned at snapshot time)
        # One past the last step whose data wait was not seen (its ``data`` is -0.0: the
        # batches came from another thread); a window holding one shows no data figures.
        self.unseen_at = 0

    def add(self, ev: Step) -> None:
        d = ev.t1 - ev.t0
        self.durations.append(d)
        self.data.append(ev.data)
        if ev.data == 0.0 and copysign(1.0, ev.data) < 0.0:
            self.unseen_at = len(self.data)
        self.backward.append(ev.backward)
        self.optimizer.append(ev.optimizer)
        if self.first_t0 is None:
            self.first_t0 = ev.t0
        self.last_t1 = ev.t1
        self.recent.append(
            StepRow(
                ev.pid,
                ev.index,
                ev.t0,
                ev.t1,
                ev.data,
                ev.backward,
                ev.optimizer,
                max(0.0, d - ev.data - ev.backward - ev.optimizer),
                self.gpu.get(ev.index),
                self.gap_kind,
            )
        )
        self.gap_kind = ""

    def add_gpu(self, ev: StepGpu) -> None:
        """GPU times arrive after their step; patch the recent row in place (rows are
        immutable, so the row is replaced)."""
        self.gpu[ev.index] = ev.gpu_s
        for i in range(len(self.recent) - 1, -1, -1):
            row = self.recent[i]
            if row.index == ev.index:
                self.recent[i] = StepRow(
                    row.pid,
                    row.index,
                    row.t0,
                    row.t1,
                    row.data,
                    row.backward,
                    row.optimizer,
                    row.other,
                    ev.gpu_s,
                    row.gap_before,
                )
                break
            if row.index < ev.index:
                break
        if len(self.gpu) > 4 * LIVE_WINDOW:
            for k in sorted(self.gpu)[:LIVE_WINDOW]:
                del self.gpu[k]

    def _bin(self) -> None:
        """Bring the whole-run histogram up to date: each step is binned once, in batches
        at snapshot time, so adding a step stays as cheap as before."""
        new = self.durations[self.binned :]
        hist = self.hist
        for d in new:
            hist[bisect_left(STEP_BUCKETS, d)] += 1  # le semantics: d == bound counts in
        self.total += sum(new)
        self.binned += len(new)

    def stats(
        self, rank: int | None, window: int | None = LIVE_WINDOW, host: str = "", syncs: int = 0
    ) -> StepStats:
        """Figures over the last ``window`` steps (None: the whole run)."""
        self._bin()
        n = len(self.durations)
        if n == 0:
            return StepStats(pid=self.pid, rank=rank, host=host, sync_count=syncs)
        lo = 0 if window is None else max(0, n - window)
        durs = self.durations[lo:]
        total = sum(durs)
        sdur = sorted(durs)
        data, bwd, opt = self.data[lo:], self.backward[lo:], self.optimizer[lo:]
        others = [max(0.0, d - a - b - c) for d, a, b, c in zip(durs, data, bwd, opt)]
        phase_p50 = {
            "data": percentile(sorted(data), 50),
            "forward/other": percentile(sorted(others), 50),
            "backward": percentile(sorted(bwd), 50),
            "optimizer": percentile(sorted(opt), 50),
        }
        gpus = (
            sorted(self.gpu.values())
            if self.gpu
            else sorted(r.gpu for r in self.recent if r.gpu is not None)
        )
        if self.unseen_at > lo:  # not seen: absent, not 0
            phase_p50.pop("data", None)
        return StepStats(
            pid=self.pid,
            rank=rank,
            count=n,
            steps_per_s=(len(durs) / total) if total > 0 else None,
            p50=percentile(sdur, 50),
            p95=percentile(sdur, 95),
            max=sdur[-1],
            phase_p50={k: v for k, v in phase_p50.items() if v is not None},
            data_wait_fraction=(sum(data) / total) if total > 0 and self.unseen_at <= lo else None,
            gpu_p50=percentile(gpus, 50) if gpus else None,
            last_t=self.last_t1,
            recent=tuple(self.recent),
            host=host,
            own_p50=percentile(sorted(d - b for d, b in zip(durs, bwd)), 50),
            sync_count=syncs,
            step_hist=tuple(self.hist),
            step_sum_s=self.total,
        )
