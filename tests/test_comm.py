"""Collectives per rank on real torchrun/gloo runs (2 ranks, CPU): DDP's exposed and
overlapped all-reduce, explicit all_reduce and barrier, the straggler by who arrives last,
a hang that names its missing rank and lines, and a desync. Two runs, shared, at once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perftop.events import CollWaiting
from perftop.model import Session
from perftop.monitor.stacks import pyspy
from perftop.recording import read_events
from tests.helpers import WORKLOADS

TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2")
JOB = str(WORKLOADS / "ddp_comm.py")
DELAY = 0.05


HANG_S, HANG_AFTER = 6.0, 2.0


def _perftop(tmp: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """``perftop ARGS`` with ``env`` added to the environment (the job's and perftop's)."""
    return subprocess.Popen(
        [sys.executable, "-m", "perftop", *args], cwd=tmp, text=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env={**os.environ, **env})  # fmt: skip


def _start(tmp: Path, **env: str) -> tuple[Path, dict[str, str], subprocess.Popen[str]]:
    rec = str(tmp / "r.perftop")
    return tmp, env, _perftop(tmp, env, "run", "--headless", "--record", rec, "--", *TORCHRUN, JOB)


def _finish(
    tmp: Path, env: dict[str, str], proc: subprocess.Popen[str]
) -> tuple[Any, dict[str, Any], Path]:
    out, err = proc.communicate(timeout=180)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    rep = _perftop(tmp, env, "report", "--json", str(tmp / "r.perftop"))
    rep_out, rep_err = rep.communicate(timeout=120)
    assert rep.returncode == 0, rep_err
    return done, json.loads(rep_out), tmp / "r.perftop"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both runs at once (the hang run mostly sleeps and waits). The straggler run: rank 1
    sleeps DELAY before each backward. The hang run: rank 1 sleeps HANG_S before an
    all_reduce rank 0 waits in (a hang at HANG_AFTER), then two steps later the ranks
    desync in a second group, until gloo gives up (3 s)."""
    slow_tmp, hang_tmp = tmp_path_factory.mktemp("slow"), tmp_path_factory.mktemp("hang")
    procs = [
        _start(slow_tmp, MODE="slow", STEPS="16", DELAY=str(DELAY)),
        _start(
            hang_tmp,
            MODE="hang,desync",
            STEPS="10",
            AT="4",
            HANG_S=str(HANG_S),
            TIMEOUT="3",
            PERFTOP_HANG_AFTER=str(HANG_AFTER),
        ),
    ]
    try:
        return {"slow": _finish(*procs[0]), "hang": _finish(*procs[1])}
    finally:
        for _, _, p in procs:
            if p.poll() is None:
                p.kill()


@pytest.fixture(scope="module")
def slow(runs):
    return runs["slow"]


@pytest.fixture(scope="module")
def hang(runs):
    return runs["hang"]


def _ranks(r: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {x["rank"]: x for x in r["ranks"]}


def test_ddp_exposed_and_overlapped_and_the_straggler(slow):
    proc, r, _ = slow
    assert proc.returncode == 0, proc.stderr
    ranks = _ranks(r)
    fast, late = ranks[0], ranks[1]
    ops = {(c["pg"], c["op"]): c for c in fast["collectives"]}
    # DDP's buckets (4 layers, a bucket each), the metric all_reduce, and the barrier
    assert ops[("default_pg", "all_reduce")]["count"] >= 16 * 3
    assert ops[("default_pg", "barrier")]["count"] == 16 // 5
    assert ops[("default_pg", "all_reduce")]["bytes"] > 16 * 4 * 256 * 256 * 4
    # rank 0 waits for rank 1's sleep, exposed; its buckets' launches overlap its backward
    assert abs(fast["comm_wait_s"] - DELAY) <= 0.2 * DELAY, fast
    assert fast["comm_overlap_s"] > 0 and fast["comm_waited_for_rank"] == 1
    assert late["comm_wait_s"] < 0.2 * DELAY, late
    s = r["comm"]["straggler"]
    assert s["rank"] == 1 and abs(s["others_wait_s"] - DELAY) <= 0.2 * DELAY
    assert late["straggler"] and late["comm_straggler"] and not fast["comm_straggler"]
    assert r["hangs"] == []
    h = next(h for h in r["hints"] if h["id"] == "comm-bound")
    assert "rank 0" in h["title"], h


def test_a_hang_names_the_missing_rank_and_the_lines(hang):
    proc, r, rec = hang
    assert r["exit_code"] == 1, proc.stderr  # the job's own exit: the desync failed it
    (h,) = [h for h in r["hangs"] if h["kind"] == "hang"]
    assert h["op"] == "all_reduce" and h["pg"] == "default_pg" and h["waited_s"] >= HANG_S - 2
    assert [m["rank"] for m in h["missing"]] == [1]
    (waiting,) = h["entered"]
    lines = Path(WORKLOADS / "ddp_comm.py").read_text().splitlines()
    file, _, rest = waiting["line"].rpartition(":")
    assert file.endswith("ddp_comm.py") and "all_reduce(metric)" in lines[int(rest.split()[0]) - 1]
    assert h["missing"][0]["last_seq"] == h["seq"] - 1
    if pyspy() is not None:  # the missing rank's stack, at its sleep
        top = h["missing"][0]["stack"][0]
        assert top["file"].endswith("ddp_comm.py"), h["missing"]
        assert "time.sleep(HANG_S)" in lines[top["line"] - 1], h["missing"]
        # the stacks were dumped for the hang itself, not only for the stalled step
        assert any(s["during"] == "collective" for s in r["stalls"]), r["stalls"]
    # shown at once: replaying the recording, the hang is there within 2x the threshold
    s = Session()
    for ev in read_events(rec):
        s.apply(ev)
        if isinstance(ev, CollWaiting) and s.snapshot().comm.hangs:
            assert ev.waited_s <= 2 * HANG_AFTER
            break
    else:
        raise AssertionError("no hang while replaying")


def test_a_desync_is_named(hang):
    _, r, _ = hang
    (h,) = [h for h in r["hangs"] if h["kind"] == "desync"]
    assert {(e["rank"], e["op"]) for e in h["entered"]} == {(0, "all_reduce"), (1, "broadcast")}
    assert h["pg"] != "default_pg" and h["seq"] == 1  # the second group's first collective


def test_the_metrics_of_a_straggler_run(slow):
    from prometheus_client import CollectorRegistry, generate_latest

    from perftop.fleet.metrics import SnapshotMetrics

    s = Session()
    s.apply_all(read_events(slow[2]))
    m = SnapshotMetrics()
    reg = CollectorRegistry(auto_describe=False)
    reg.register(m)  # type: ignore[arg-type]
    m.update(s.snapshot(window=None))
    body = generate_latest(reg).decode()
    wait = re.search(r'^perftop_comm_wait_seconds\{host="[^"]+",rank="0"\} (\S+)$', body, re.M)
    assert wait and abs(float(wait.group(1)) - DELAY) <= 0.2 * DELAY, body
    strag = re.search(r'^perftop_comm_straggler_wait_seconds\{host="[^"]+",rank="1"\} ', body, re.M)
    assert strag, body
    assert re.search(r'^perftop_collectives_total\{host="[^"]+",op="barrier",pg="default_pg",'
                     r'rank="1"\} 3\.0$', body, re.M), body  # fmt: skip
    assert 'perftop_comm_hangs{kind="hang"} 0.0' in body


def test_the_recorder_is_asked_for_only_in_a_job_with_ranks():
    from perftop.hook.collectives import ENV_BUFFER, prepare_env

    single: dict[str, str] = {}
    prepare_env(single)  # a single-process job: nothing set, nothing recorded
    assert single == {}
    ranked = {"WORLD_SIZE": "4"}
    prepare_env(ranked)
    assert int(ranked[ENV_BUFFER]) > 0
    own = {"WORLD_SIZE": "4", ENV_BUFFER: "0"}  # the job's own setting stays
    prepare_env(own)
    assert own[ENV_BUFFER] == "0"
    off = {"WORLD_SIZE": "4", "PERFTOP_COMM": "0"}
    prepare_env(off)
    assert ENV_BUFFER not in off


def test_the_collective_events_round_trip():
    from perftop.events import CollBatch, CollInfo, decode

    rec = ("default_pg", 7, "all_reduce", 68, "[[17]]", 1795923678.364687, 1)
    for ev in (
        CollBatch(1.0, 42, (rec,), 3),
        CollInfo(1.0, 42, 0, "why"),
        CollWaiting(2.0, 42, "default_pg", 7, "barrier", "[]", 1.0, 1.0, "x.py:3 f"),
    ):
        assert decode(json.loads(json.dumps(ev.encode()))) == ev  # fmt: skip


def test_a_collector_lines_up_ranks_across_nodes():
    """Two nodes whose rank processes share a pid: rank 1, on node b, arrives 30 ms late
    at every collective; the collector's model names it, under its own node and pid."""
    from perftop.events import CollBatch, Hello, NodeScope, Step
    from perftop.model.fleet import FleetSession

    f = FleetSession()
    for node, rank, late in (("a", 0, 0.0), ("b", 1, 0.03)):
        f.apply(NodeScope(node))
        f.apply(Hello(1000.0, 100, 1, node, ("train.py",), rank=rank, world_size=2))
        recs = []
        for i in range(10):
            t0 = 1000.0 + i * 0.1
            f.apply(Step(100, i, t0, t0 + 0.08, backward=0.05))
            recs.append(("default_pg", i + 1, "all_reduce", 64, "[[16]]", t0 + 0.02 + late, 1))
        f.apply(CollBatch(1002.0, 100, tuple(recs)))
    c = f.snapshot(window=None).comm
    assert c.straggler is not None and (c.straggler.rank, c.straggler.host) == (1, "b")
    assert abs(c.straggler.wait_s - 0.03) < 1e-6 and c.straggler.pid == 100
    wait = {(r.host, r.pid): r.wait_s for r in c.ranks}
    assert wait[("b", 100)] == 0.0 and abs((wait[("a", 100)] or 0) - 0.03) < 1e-6
