"""A bounded quantile sketch (DDSketch-style log buckets) for whole-run percentiles.

A run of a week has hundreds of millions of steps; keeping every duration to sort it for a
percentile grows the monitor by 32 bytes a step per process. A value ``x > 0`` goes to bucket
``ceil(log(x) / log(GAMMA))``; every value of a bucket is within ``RELATIVE_ERROR`` of the
bucket's representative, so any rank's value is known to that relative error whatever the
run length. Step times from a microsecond to a day need at most ~2,300 buckets; a real run
touches a few hundred. Zero and negative values are kept too (a zero bucket, a mirrored
sketch), so the sketch answers for any float.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

RELATIVE_ERROR = 0.005  # 0.5%: every value read back is within this of the true one
GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
_LOG_GAMMA = math.log(GAMMA)
_TINY = 1e-12  # below this a value counts as zero (clock readings are whole nanoseconds)


class Sketch:
    """Counts per log bucket; ``value_at(k)`` is the k-th smallest value (0-based) to
    ``RELATIVE_ERROR``. Memory is bounded by the range of values, not their number."""

    __slots__ = ("pos", "neg", "zeros", "count")

    def __init__(self) -> None:
        self.pos: dict[int, int] = {}
        self.neg: dict[int, int] = {}
        self.zeros = 0
        self.count = 0

    def add(self, x: float) -> None:
        self.add_all((x,))

    def add_all(self, xs: Iterable[float]) -> None:
        """As :meth:`add` for each, without a call per value (binning a batch of steps)."""
        pos, log, ceil, inv = self.pos, math.log, math.ceil, 1.0 / _LOG_GAMMA
        for x in xs:
            self.count += 1
            if x > _TINY:
                k = ceil(log(x) * inv)
                pos[k] = pos.get(k, 0) + 1
            elif x < -_TINY:
                k = ceil(log(-x) * inv)
                self.neg[k] = self.neg.get(k, 0) + 1
            else:
                self.zeros += 1

    def buckets(self) -> int:
        return len(self.pos) + len(self.neg) + (1 if self.zeros else 0)

    def _ordered(self) -> list[tuple[float, int]]:
        """(representative value, count) from the smallest value up."""
        out = [(-_value(k), self.neg[k]) for k in sorted(self.neg, reverse=True)]
        if self.zeros:
            out.append((0.0, self.zeros))
        out += [(_value(k), self.pos[k]) for k in sorted(self.pos)]
        return out

    def values_at(self, ranks: Iterable[int]) -> list[float]:
        """The values of sorted 0-based ``ranks`` (ascending), one walk of the buckets."""
        out: list[float] = []
        seen, it = 0, iter(self._ordered())
        value, c = 0.0, 0
        for r in ranks:
            while seen + c <= r:
                seen += c
                nxt = next(it, None)
                if nxt is None:
                    break
                value, c = nxt
            out.append(value)
        return out

    def percentile(self, q: float) -> float | None:
        """As :func:`perftop.model.stats.percentile` (linear between the two nearest ranks),
        each rank's value to ``RELATIVE_ERROR``; so the result is within it too."""
        n = self.count
        if n == 0:
            return None
        pos = (n - 1) * q / 100.0
        lo = int(pos)
        hi = min(lo + 1, n - 1)
        a, b = self.values_at((lo, hi))
        return a + (b - a) * (pos - lo)


def _value(k: int) -> float:
    """The bucket's representative: within ``RELATIVE_ERROR`` of all of (γ^(k-1), γ^k]."""
    return 2.0 * GAMMA**k / (GAMMA + 1.0)
