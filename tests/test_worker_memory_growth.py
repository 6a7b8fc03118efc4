"""worker-memory on steady copy-on-write growth: workers of a list-backed dataset whose
private memory grows by a few MiB/s, far below the size bars, get the hint with the growth
projected to its end; a flat or jumpy series is no growth."""

from __future__ import annotations

import sys
from pathlib import Path

from perftop.model.trends import steady_growth
from tests.helpers import WORKLOADS, run_and_report

MIB = 2**20


def test_steady_growth_is_fitted_and_flat_or_jumpy_series_are_not() -> None:
    steady = [(float(t), 100 * MIB + t * 3 * MIB) for t in range(10)]
    rate = steady_growth(steady)
    assert rate is not None and abs(rate - 3 * MIB) < 1
    assert steady_growth(steady[:4]) is None  # too few samples
    assert steady_growth([(t / 10, v) for t, v in steady]) is None  # under 5 s
    flat = [(float(t), 100 * MIB + (t % 2) * 4096) for t in range(10)]
    assert steady_growth(flat) is None  # a page up and down: no fit
    jump = [(float(t), 100 * MIB + (40 * MIB if t == 9 else 0)) for t in range(10)]
    assert steady_growth(jump) is None  # one step at the end is not steady growth
    shrinking = [(t, 200 * MIB - v + 100 * MIB) for t, v in steady]
    assert steady_growth(shrinking) is None


def test_workers_that_grow_steadily_get_the_hint_with_a_projection(tmp_path: Path) -> None:
    proc, report = run_and_report(
        tmp_path, sys.executable, str(WORKLOADS / "cow_dataset.py"), "1000000", "10", "16"
    )
    assert proc.returncode == 0, proc.stderr
    workers = [p for p in report["processes"] if p["role"] == "worker"]
    assert len(workers) == 2
    # far below the size bars (128 MiB grown by 64 MiB): only the steady growth can say it
    assert all(w["uss_bytes_max"] < 128 * MIB for w in workers), workers
    hint = next((h for h in report["hints"] if h["id"] == "worker-memory"), None)
    assert hint is not None, report["hints"]
    growth = next(e for e in hint["evidence"] if "grows steadily" in e)
    assert "it reaches its RSS" in growth and "in about" in growth, growth
