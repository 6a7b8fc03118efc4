"""A distributed job's ranks and the straggler, and the Prometheus endpoint, on real runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from perftop.model.ranks import find_straggler
from perftop.model.snapshot import StepStats
from tests.helpers import WORKLOADS, run_and_report

TORCHRUN = shutil.which("torchrun", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(TORCHRUN is None, reason="no torchrun")
@pytest.mark.parametrize("slow", [0, 1])
def test_torchrun_names_the_slow_rank(tmp_path, monkeypatch, slow):
    monkeypatch.setenv("SLOW_RANK", str(slow))
    proc, r = run_and_report(
        tmp_path,
        TORCHRUN,
        "--standalone",
        "--nproc_per_node=2",
        str(WORKLOADS / "ddp_slow_rank.py"),
    )
    assert proc.returncode == 0, proc.stderr
    ranks = {x["rank"]: x for x in r["ranks"]}
    assert sorted(ranks) == [0, 1]
    assert all(x["host"] and x["steps"] == 20 for x in ranks.values())
    s, fast = ranks[slow], ranks[1 - slow]
    assert s["straggler"] and s["slowest"] and not fast["straggler"] and not fast["slowest"]
    # Step times are the same under DDP; where the time goes is not.
    assert s["outside_backward_p50_s"] > fast["outside_backward_p50_s"] + 0.015
    assert fast["backward_p50_s"] > s["backward_p50_s"] + 0.015
    # 20 steps: too short for the live engine, the whole-run verdict names it every time
    h = next(h for h in r["hints"] if h["id"] == "straggler")
    assert f"rank {slow}" in h["title"] and h["whole_run"], h


def _ranked(rank: int, own: float, bwd: float) -> StepStats:
    return StepStats(pid=100 + rank, rank=rank, count=50, p50=own + bwd, own_p50=own,
                     phase_p50={"backward": bwd})  # fmt: skip


def test_no_straggler_without_waiting():
    """Ranks that differ but do not wait for each other (no all-reduce) name none."""
    assert find_straggler([_ranked(0, 0.010, 0.002), _ranked(1, 0.040, 0.002)]) is None
    s = find_straggler([_ranked(0, 0.010, 0.032), _ranked(1, 0.040, 0.002)])
    assert s is not None and s.rank == 1 and abs(s.wait_s - 0.030) < 1e-9


NAMES = (
    "perftop_steps_total",
    "perftop_step_seconds_bucket",
    "perftop_step_seconds_sum",
    "perftop_step_seconds_count",
    "perftop_data_wait_ratio",
    "perftop_process_cpu_percent",
    "perftop_process_uss_bytes",
    "perftop_sync_events_total",
)


def _missing(body: str) -> list[str]:
    """Names with no sample line (a HELP or TYPE line alone does not count)."""
    return [n for n in NAMES if not re.search(rf"^{n}\{{", body, re.M)]


def _scrape(url: str, openmetrics: bool = False) -> str:
    req = urllib.request.Request(url)
    if openmetrics:
        req.add_header("Accept", "application/openmetrics-text; version=1.0.0")
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.read().decode()


def test_prometheus_endpoint_while_training(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "perftop", "run", "--headless", "--no-record",
         "--interval", "0.2", "--prometheus", "127.0.0.1:0", "--",
         sys.executable, str(WORKLOADS / "sync_forever.py")],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PERFTOP_SYNC": "all"},
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        m = re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", line)
        assert m, line
        deadline = time.monotonic() + 90
        body = ""
        while time.monotonic() < deadline:
            body = _scrape(m.group(1))
            if not _missing(body) and re.search(r"perftop_steps_total\{.*\} [1-9]", body):
                break
            time.sleep(0.5)
        assert proc.poll() is None  # scraped while the job trains
        assert not _missing(body), body
        steps = re.search(r'perftop_steps_total\{host="([^"]+)",rank=""\} (\d+)', body)
        assert steps and int(steps.group(2)) > 0, body
        assert re.search(r'perftop_step_seconds_bucket\{host="[^"]+",le="\+Inf",rank=""\}', body)
        assert re.search(r'perftop_process_cpu_percent\{host="[^"]+",pid="\d+",rank="",'
                         r'role="main",worker=""\}', body)  # fmt: skip
        assert re.search(r'perftop_sync_events_total\{host="[^"]+",op="[a-z_]+",'
                         r'site="sync_forever\.py:\d+"\}', body)  # fmt: skip
        om = _scrape(m.group(1), openmetrics=True)
        assert om.rstrip().endswith("# EOF") and "# TYPE perftop_steps counter" in om
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_step_histogram_counts_each_step_once():
    from perftop.events import Step
    from perftop.model import Session
    from perftop.model.steps import STEP_BUCKETS

    s = Session()
    for i, d in enumerate((0.001, 0.0011, 0.2, 100.0)):
        s.apply(Step(1, i, 10.0 * i, 10.0 * i + d))
    first = s.snapshot().steps
    s.apply(Step(1, 9, 50.0, 50.02))
    h = s.snapshot().steps  # a second snapshot bins only the new step
    assert sum(first.step_hist) == 4 and sum(h.step_hist) == 5
    b = dict(zip((*STEP_BUCKETS, "inf"), h.step_hist))
    assert (b[0.001], b[0.0025], b[0.025], b[0.25], b["inf"]) == (1, 1, 1, 1, 1)
    assert abs(h.step_sum_s - (0.001 + 0.0011 + 0.2 + 100.0 + 0.02)) < 1e-6
