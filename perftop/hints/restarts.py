"""Workers that start again with every epoch: the wait they cost, read from the steps.

A DataLoader without ``persistent_workers`` starts its workers at each ``iter(loader)``
(each epoch) and stops them at its end. Until the new workers send their first batches
the loop waits: a fork takes tens of milliseconds, a spawned worker imports torch and the
job's modules anew (a second or more). The step after each start holds that wait in its
data time, so what the restarts cost is measured, step by step, not assumed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from perftop.hints.base import Loop, seconds
from perftop.model.snapshot import Loader

SHARE = 0.5  # of the data wait, at epoch starts, for the restarts to be the story
MIN_STARTS = 2  # starts among the steps looked at


@dataclass(frozen=True, slots=True)
class Restarts:
    count: int  # iterator starts among the steps looked at
    wait_s: float  # the data wait of the first step after each of them, in all
    share: float  # of the data wait of those steps
    method: str  # the workers' start method ("" unknown)

    @property
    def mean_s(self) -> float:
        return self.wait_s / self.count  # count >= MIN_STARTS


def restarts(lp: Loop, loaders: Sequence[Loader]) -> Restarts | None:
    """The restarts' wait, where the loop's process has loaders that start non-persistent
    workers again during the steps looked at (a training loader, an evaluation loader
    started between epochs: any of them) and the first step after each start holds at
    least half of their data wait; else None."""
    mine = [
        ld for ld in loaders if ld.pid == lp.pid and ld.num_workers and not ld.persistent_workers
    ]
    rows = lp.rows
    if not mine or not rows:
        return None
    first, last = rows[0].t0, rows[-1].t1
    ends = [r.t1 for r in rows]
    after: set[int] = set()  # the first step after each start (two starts, one step: once)
    for s in (s for ld in mine for s in ld.starts):
        if first <= s <= last:
            i = bisect_right(ends, s)
            if i < len(rows):
                after.add(i)
    wait = sum(rows[i].data for i in after)
    total = sum(r.data for r in rows)
    if len(after) < MIN_STARTS or total <= 0 or wait < SHARE * total:
        return None
    method = "/".join(sorted({ld.start_method for ld in mine if ld.start_method}))
    return Restarts(len(after), wait, wait / total, method)


def evidence(r: Restarts) -> str:
    how = f", {r.method}" if r.method else ""
    return (
        f"the workers start again with each epoch (persistent_workers=False{how}): the first "
        f"batch after each of {r.count} starts waited {seconds(r.mean_s)} on average, "
        f"{r.share:.0%} of the data wait"
    )


ADVICE = (
    "DataLoader(..., persistent_workers=True) starts the workers once and keeps them "
    "between epochs."
)
