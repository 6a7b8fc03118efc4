"""Small statistics helpers shared by the model and the report."""

from __future__ import annotations

from collections.abc import Sequence


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile ``q`` (0..100) of already sorted values."""
    n = len(sorted_values)
    if n == 0:
        return None
    if n == 1:
        return float(sorted_values[0])
    pos = (n - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


def median(values: Sequence[float]) -> float | None:
    """The median of unsorted values (hints compare a rank or a burst with the rest)."""
    return percentile(sorted(values), 50.0)
