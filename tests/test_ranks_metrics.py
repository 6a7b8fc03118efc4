"""A distributed job's ranks and the straggler, and the Prometheus endpoint, on real runs."""

from __future__ import annotations

import os
import re
import shutil
import statistics
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
@pytest.mark.parametrize("slow", [1])  # (rank 0 would pass a rule that named rank 0 by default)
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
    assert len({x["pid"] for x in ranks.values()}) == 2
    roles = {p["pid"]: p["role"] for p in r["processes"]}
    assert [roles[ranks[k]["pid"]] for k in (0, 1)] == ["rank", "rank"]
    assert "other" in roles.values()  # the torchrun launcher: the job's, not a trainer
    s, fast = ranks[slow], ranks[1 - slow]
    assert s["straggler"] and s["slowest"] and not fast["straggler"] and not fast["slowest"]
    # Step times are the same under DDP; where the time goes is not.
    assert s["outside_backward_p50_s"] > fast["outside_backward_p50_s"] + 0.015
    assert fast["backward_p50_s"] > s["backward_p50_s"] + 0.015
    # 20 steps: too short for the live engine, the whole-run verdict names it every time
    h = next(h for h in r["hints"] if h["id"] == "straggler")
    assert f"rank {slow}" in h["title"] and h["whole_run"], h
    # one host: the hints name each rank by its rank alone (a collector's node: test_comm.py)
    said = " ".join(" ".join([x["title"], *x["evidence"], *x["advice"]]) for x in r["hints"])
    assert f"rank {slow} on " not in said and f"rank {1 - slow} on " not in said, said
    # by who arrives last at the collectives: a slow loader is named too, and the others'
    # wait is the loader's delay (30 ms a step, ddp_slow_rank.py), as long as it was: the
    # job's own clocks, each step's backward on the fast rank less the slow one's
    own = {int(k): [float(t) for t in v.split(",")]
           for k, v in re.findall(r"^backward (\d) (\S+)$", proc.stdout, re.M)}  # fmt: skip
    assert sorted(own) == [0, 1], proc.stdout
    waited = statistics.median(f - s for f, s in zip(own[1 - slow], own[slow], strict=True))
    assert 0.025 < waited < 0.06, own  # the delay, and however late its rank woke from it
    c = r["comm"]["straggler"]
    assert c["rank"] == slow and abs(c["others_wait_s"] - waited) <= 0.05 * waited + 0.0015, c
    assert s["comm_straggler"] and abs(fast["comm_wait_s"] - waited) <= 0.05 * waited + 0.0015


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
        assert re.search(r'perftop_process_cpu_percent\{host="[^"]+",rank="",'
                         r'role="main",worker=""\}', body)  # fmt: skip
        assert re.search(r'perftop_process_info\{host="[^"]+",pid="\d+",rank="",'
                         r'role="main",worker=""\} 1', body)  # fmt: skip
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


def test_metrics_counters_outlive_processes_and_hints_clear_to_zero():
    """Worker CPU seconds and batches add up across epochs (new pids, same labels); a hint
    that cleared stays as 0; a process with no role yet has no sample."""
    from prometheus_client import CollectorRegistry, generate_latest

    from perftop.fleet.metrics import SnapshotMetrics
    from perftop.model.snapshot import Hint, Meta, ProcessRole, ProcRow, Snapshot, Trainer
    from perftop.model.workers import WorkerRow

    m = SnapshotMetrics()
    reg = CollectorRegistry(auto_describe=False)
    reg.register(m)  # type: ignore[arg-type]
    main = Trainer(1, 0, "h", ("train.py",), None, None, None, "cpu", "2")

    def snap(t: float, worker: int, cpu: float, batches: int, hints=()) -> str:
        procs = (ProcRow(1, cpu_seconds=10 * t), ProcRow(worker, cpu_seconds=cpu),
                 ProcRow(999, cpu_seconds=1.0))  # fmt: skip
        roles = (ProcessRole(1, "main"), ProcessRole(worker, "worker", worker_id=0),
                 ProcessRole(999, "other"))  # fmt: skip
        w = WorkerRow(worker, 1, 0, 1, t, t, False, batches, 0.0, 0.0)
        m.update(Snapshot(meta=Meta(command=("x",), host="h", start_t=0.0, now_t=t, job_pid=1),
                          trainers=(main,), roles=roles, processes=procs, workers=(w,),
                          hints=hints))  # fmt: skip
        return generate_latest(reg).decode()

    hint = Hint("data_starved", "high", "t", host="h")
    body = snap(1.0, 100, 2.0, 5, (hint,))
    assert 'perftop_hint_active{host="h",id="data_starved"} 1.0' in body
    assert 'role="other"' not in body  # 999 may still turn out to be a worker
    body = snap(2.0, 101, 0.5, 3)  # the next epoch: a new worker pid, same index
    assert 'perftop_hint_active{host="h",id="data_starved"} 0.0' in body
    assert (
        'perftop_process_cpu_seconds_total{host="h",rank="",role="worker",worker="0"} 2.5' in body
    )
    assert 'perftop_dataloader_batches_total{host="h",rank="",worker="0"} 8.0' in body
    assert 'pid="101"' in body and 'pid="100"' not in body
    assert 'perftop_process_cpu_seconds_total{host="h",rank="",role="other",worker=""}' not in body
    body = snap(7.0, 101, 0.5, 3)  # 6 s without a role: `other`
    assert 'perftop_process_cpu_seconds_total{host="h",rank="",role="other",worker=""} 1.0' in body


def test_metrics_job_info_per_node_of_a_collector():
    from prometheus_client import CollectorRegistry, generate_latest

    from perftop.fleet.metrics import SnapshotMetrics
    from perftop.model.snapshot import Meta, NodeRow, Snapshot

    m = SnapshotMetrics()
    reg = CollectorRegistry(auto_describe=False)
    reg.register(m)  # type: ignore[arg-type]
    nodes = (NodeRow("n1", state="exited (2)"), NodeRow("n2", state="running"))
    m.update(Snapshot(meta=Meta(command=("collect",), host="c"), nodes=nodes))
    body = generate_latest(reg).decode()
    assert 'perftop_job_info{command="",exit_code="2",host="n1",state="exited"} 1.0' in body
    assert 'perftop_job_info{command="",exit_code="",host="n2",state="running"} 1.0' in body
    assert 'host="c"' not in body


def test_prometheus_linger_bad_value_is_one_line(tmp_path):
    from tests.helpers import perftop

    r = perftop("run", "--prometheus", "0", "--prometheus-linger", "soon", "--", "true",
                cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2 and "--prometheus-linger" in r.stderr and "Traceback" not in r.stderr


def test_sync_site_label_names_one_file_as_the_report_does():
    """Two libraries' own lines with one file name and line (no user frame on the stack:
    ``file`` is the library's, ``package`` set) are two series, each named from its package's
    folder as the report and the screen name it; a user's line keeps its file's name."""
    from prometheus_client import CollectorRegistry, generate_latest

    from perftop.events import Step
    from perftop.events.sync import SyncBatch, SyncInfo
    from perftop.fleet.metrics import SnapshotMetrics
    from perftop.model import Session

    sp = "/venv/lib/python3.11/site-packages"
    sites = (
        ("item", f"{sp}/ignite/engine/__init__.py", 448, "_run", "potential", 2, None,
         None, None, None, "ignite"),
        ("item", f"{sp}/ignite/metrics/__init__.py", 448, "update", "potential", 3, None,
         None, None, None, "ignite"),
        ("item", "/home/u/job/train.py", 12, "main", "potential", 1, None,
         f"{sp}/skorch/net.py", 1277, "fit", "skorch"),
    )  # fmt: skip
    s = Session()
    s.apply(SyncInfo(0.0, 1, False, True, exact=True))
    s.apply(Step(1, 0, 0.0, 1.0))
    s.apply(SyncBatch(1, 0, True, sites))
    m = SnapshotMetrics()
    reg = CollectorRegistry(auto_describe=False)
    reg.register(m)  # type: ignore[arg-type]
    m.update(s.snapshot())
    body = generate_latest(reg).decode()
    lines = sorted(ln for ln in body.splitlines() if ln.startswith("perftop_sync_events_total"))
    host = s.snapshot().meta.host
    assert lines == [
        f'perftop_sync_events_total{{host="{host}",op="item",site="{site}"}} {n}'
        for site, n in (("ignite/engine/__init__.py:448", "2.0"),
                        ("ignite/metrics/__init__.py:448", "3.0"), ("train.py:12", "1.0"))
    ], body  # fmt: skip
