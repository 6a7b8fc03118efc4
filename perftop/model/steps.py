"""Step history per training process, bounded whatever the run length: a ring of the last
``LIVE_WINDOW`` steps for live percentiles, a deque of recent rows for charts, and for
whole-run figures running totals plus quantile sketches (:mod:`perftop.model.sketch`, to
``RELATIVE_ERROR``; exact while the whole run still fits in the ring)."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Sequence
from math import copysign

from perftop.events import Step, StepGpu
from perftop.model.sketch import Sketch
from perftop.model.snapshot import StepRow
from perftop.model.sorted_ring import SortedRing
from perftop.wire import STEP_SOURCES, StepRecord

RECENT_ROWS = 240
LIVE_WINDOW = 1000
# Upper bounds (seconds) of the whole-run step-time histogram; a last bucket holds the rest.
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SKETCHED = ("step", "data", "forward/other", "backward", "optimizer", "own")
# What closed a step says of the work seen in it (docs/steps.md): a batch alone (LOADER),
# a backward() too (BACKWARD), else an optimizer's step, perftop.step() or a source not
# said (a record's code, by STEP_SOURCES). The phases a step source cannot have seen are
# absent, not 0.
LOADER, BACKWARD, UPDATE = 1, 2, 3
_SOURCE_RANK = {"loader": LOADER, "backward": BACKWARD}
_CODE_RANK = {STEP_SOURCES.index(s): r for s, r in _SOURCE_RANK.items()}


def overall_differs(rate: float | None, wall: float | None) -> bool:
    """Whether the rate over wall time (``wall_steps_per_s``: the time between steps in it)
    is worth showing beside the rate over the steps' own time: 2% lower or more."""
    return rate is not None and wall is not None and wall < 0.98 * rate


class StepSeries:
    """All steps of one process in bounded memory. Appending is O(1); a live snapshot costs
    O(window), a whole-run one O(window + sketch buckets)."""

    __slots__ = (
        "pid",
        "count",
        "durations",
        "starts",
        "data",
        "backward",
        "optimizer",
        "other",
        "own",
        "recent",
        "gpu",
        "first_t0",
        "first_t1",
        "last_t1",
        "gap_kind",
        "hist",
        "total",
        "data_total",
        "max",
        "binned",
        "sketches",
        "unseen_at",
        "sorted_ring",
        "strongest",
    )

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.count = 0  # steps in the whole run
        # Rings of the last LIVE_WINDOW steps: entry i % LIVE_WINDOW holds step i.
        self.durations = array("d")
        self.starts = array("d")  # each step's t0: the window's wall span (wall_steps_per_s)
        self.data = array("d")
        self.backward = array("d")
        self.optimizer = array("d")
        self.other = array("d")  # derived once per step: max(0, step - the phases)
        self.own = array("d")  # step - backward: the rank's own work
        self.recent: deque[StepRow] = deque(maxlen=RECENT_ROWS)
        self.gpu: dict[int, float] = {}
        self.first_t0: float | None = None
        self.first_t1: float | None = None
        self.last_t1: float | None = None
        self.gap_kind = ""  # time outside training steps came before the next step
        self.hist = [0] * (len(STEP_BUCKETS) + 1)
        self.total = 0.0  # whole-run sums, maximum and sketches of the binned steps
        self.data_total = 0.0
        self.max = 0.0
        self.binned = 0  # steps already counted in hist/sketches (binned in batches)
        # step time, data, forward/other, backward, optimizer, own (step - backward)
        self.sketches = tuple(Sketch() for _ in SKETCHED)
        # One past the last step whose data wait was not seen (its ``data`` is -0.0: the
        # batches came from another thread); figures over steps holding one show no data.
        self.unseen_at = 0
        self.sorted_ring = SortedRing(LIVE_WINDOW)  # the ring's columns sorted, for stats()
        # the strongest source that closed a step so far: under UPDATE, no torch.optim step
        # (the update, a hand-written one or Keras's, is in forward/other: the optimizer
        # phase is not measured), and under BACKWARD no backward() either (an inference
        # loop, or an update perftop does not see)
        self.strongest = 0

    def __getstate__(self) -> dict[str, object]:
        """Pickled (a replay checkpoint) without the two rings derived from the others."""
        derived = ("other", "own", "sorted_ring")
        return {k: getattr(self, k) for k in self.__slots__ if k not in derived}

    def __setstate__(self, state: dict[str, object]) -> None:
        for k, v in state.items():
            setattr(self, k, v)
        self.sorted_ring = SortedRing(LIVE_WINDOW)
        cols = zip(self.durations, self.data, self.backward, self.optimizer)
        self.other = array("d", [max(0.0, d - a - b - c) for d, a, b, c in cols])
        self.own = array("d", [d - b for d, b in zip(self.durations, self.backward)])

    def add(self, ev: Step) -> None:
        if self.strongest < UPDATE:
            self.strongest = max(self.strongest, _SOURCE_RANK.get(ev.source, UPDATE))
        self.add_record(ev.index, ev.t0, ev.t1, ev.data, ev.backward, ev.optimizer)

    def add_records(self, records: Sequence[StepRecord]) -> None:
        """This process's packed records, in order, as :meth:`add_record` of each; a row
        of :attr:`recent` is made only for those that stay there (a tight loop's frame
        holds five times as many steps as the rows kept)."""
        first_kept = len(records) - RECENT_ROWS
        if self.strongest < UPDATE:
            rank = _CODE_RANK.get
            top = max((rank(r[7], UPDATE) for r in records), default=0)
            self.strongest = max(self.strongest, top)
        add = self.add_record
        for k, (_pid, index, t0, t1, data, bwd, opt, _src) in enumerate(records):
            add(index, t0, t1, data, bwd, opt, k >= first_kept)

    def add_record(
        self,
        index: int,
        t0: float,
        t1: float,
        data: float,
        backward: float,
        optimizer: float,
        row: bool = True,
    ) -> None:
        """One step of this process from its fields (a :class:`Step`'s, or a packed
        record's: the ingest folds a frame of records without making an event of each);
        ``row``: False for a step a later one of the same frame pushes out of
        :attr:`recent` at once."""
        d = t1 - t0
        if self.count - self.binned >= LIVE_WINDOW:
            self.bin_up()  # the ring is about to overwrite a step not yet binned
        n, other = self.count, max(0.0, d - data - backward - optimizer)
        if data == 0.0 and copysign(1.0, data) < 0.0 and n > 0:  # the first may be unseen
            # (a feeder's wait is timed from the second step on)
            self.unseen_at = n + 1
        if n < LIVE_WINDOW:
            self.durations.append(d)
            self.starts.append(t0)
            self.data.append(data)
            self.backward.append(backward)
            self.optimizer.append(optimizer)
            self.other.append(other)
            self.own.append(d - backward)
        else:
            i = n % LIVE_WINDOW
            self.durations[i] = d
            self.starts[i] = t0
            self.data[i] = data
            self.backward[i] = backward
            self.optimizer[i] = optimizer
            self.other[i] = other
            self.own[i] = d - backward
        self.count = n + 1
        if self.first_t0 is None:
            self.first_t0, self.first_t1 = t0, t1
        self.last_t1 = t1
        if not row:
            self.gap_kind = ""
            return
        self.recent.append(
            StepRow(
                self.pid,
                index,
                t0,
                t1,
                data,
                backward,
                optimizer,
                other,
                self.gpu.get(index),
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

    def columns(self) -> tuple[array[float], ...]:
        return (self.durations, self.data, self.other, self.backward, self.optimizer, self.own)

    def window(self, last: int = LIVE_WINDOW) -> tuple[list[float], ...]:
        """The :meth:`columns` of the last ``last`` steps, oldest first."""
        n, cols = self.count, self.columns()
        k = min(last, n, LIVE_WINDOW)
        if n <= LIVE_WINDOW:
            return tuple(c[n - k :].tolist() for c in cols)
        i = n % LIVE_WINDOW  # the oldest entry
        start = (i + LIVE_WINDOW - k) % LIVE_WINDOW
        if start < i:
            return tuple(c[start:i].tolist() for c in cols)
        return tuple(c[start:].tolist() + c[:i].tolist() for c in cols)

    def bin_up(self) -> None:
        """Bring the whole-run histogram, sums and sketches up to date: each step is binned
        once, in batches (at snapshot time, or before the ring overwrites it), so adding a
        step stays as cheap as before."""
        new = self.count - self.binned
        if new <= 0:
            return
        cols = self.window(new)
        durs, hist = cols[0], self.hist
        for d in durs:
            hist[bisect_left(STEP_BUCKETS, d)] += 1  # le semantics: d == bound counts in
        self.total += sum(durs)
        self.data_total += sum(cols[1])
        self.max = max(self.max, max(durs))
        for sketch, values in zip(self.sketches, cols):
            sketch.add_all(values)
        self.binned = self.count
