"""A real Ray Train job under ``perftop run`` (issues 44 and 46): ``TorchTrainer`` with 2 CPU
workers (gloo, DDP through ``prepare_model``, ``prepare_data_loader``), checked against the
job's own counters (``tests/workloads/ray_train.py``) and Ray's (the rank and world size it
sets in each worker's environment): each worker's steps and rank, DDP's all-reduces per rank
from c10d's flight recorder, no stall and nothing cut short though each worker idles after
its last step until Ray tears it down, and Ray's processes named in the Processes table.

One run for the module: Ray's start-up (gcs_server, raylet, its agents, Ray Train's actors,
an actor per worker) is most of its cost: 90-110 s of wall and about 60 CPU-s over the whole
process tree (20-25 in pytest's process and what it waits for) on a loaded 2-core machine,
for 4 s of training."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from statistics import median
from typing import Any

import pytest

from perftop.events import Between, BetweenOpen, HookClose, ProcSample, Step, TrainThread
from perftop.events.probes import proc_row
from perftop.recording import read_events
from tests.helpers import WORKLOADS, needs, perftop

needs("ray")  # CI installs it (the test extra); a skip fails CI

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("ray")
    # Ray's sockets live under its temp dir: a short path (AF_UNIX's 107 bytes), ours alone
    ray_tmp = tempfile.mkdtemp(prefix="ray")
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_USAGE_STATS_ENABLED": "0"}
    try:
        mon = subprocess.run(
            [sys.executable, "-m", "perftop", "run", "--headless", "--record",
             str(d / "r.perftop"), "--", sys.executable, str(WORKLOADS / "ray_train.py"),
             str(d / "own")],
            cwd=d, env=env, text=True, capture_output=True, timeout=360,
            stdin=subprocess.DEVNULL)  # fmt: skip
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert mon.returncode == 0, mon.stderr[-3000:]
    own = next(json.loads(ln) for ln in reversed(mon.stdout.splitlines()) if ln.startswith("{"))
    rep = perftop("report", "--json", str(d / "r.perftop"), cwd=d)
    text = perftop("report", str(d / "r.perftop"), cwd=d)
    assert rep.returncode == 0 and text.returncode == 0, rep.stderr + text.stderr
    return {"own": own, "rep": json.loads(rep.stdout), "text": text.stdout,
            "events": list(read_events(d / "r.perftop")), "summary": mon.stderr}  # fmt: skip


def test_each_worker_is_a_rank_with_its_own_steps(run) -> None:
    own, rep = run["own"], run["rep"]
    assert own["error"] == "None" and len(own["workers"]) == 2, own
    ranks = {r["pid"]: r for r in rep["ranks"]}
    for w in own["workers"]:
        # the rank and world size Ray set in the worker's environment, as its context says
        assert (w["env_rank"], w["env_world_size"]) == (str(w["rank"]), str(w["world_size"]))
        r = ranks[w["pid"]]
        assert r["rank"] == w["rank"] and r["steps"] == w["steps"] == 18, (r, w)
        assert r["step_time_p50_s"] == pytest.approx(median(w["step_s"]), rel=0.3, abs=0.005)
    assert sorted(r["rank"] for r in rep["ranks"]) == [0, 1]


def test_each_report_is_time_outside_steps(run) -> None:
    """``ray.train.report`` waits for every worker (a barrier), for the upload of a checkpoint
    it carries and for the controller to take the last result (its 2 s poll): each call is
    a ``report`` interval of its worker, as long as the worker's own timer of the call.
    Rank 0's second report carries a checkpoint saved right before it: its ``torch.save``
    is a checkpoint that ends where the report begins, and the monitor is told the report
    runs from there. No step holds a report's wait (an epoch's first step did: up to 2 s,
    a stalled step)."""
    own, events = run["own"], run["events"]
    for w in own["workers"]:
        mine = [e for e in events if isinstance(e, Between) and e.pid == w["pid"]]
        reports = [e for e in mine if e.kind == "report"]
        calls = w["call_s"]
        if w["rank"] == 0:
            assert [e.kind for e in mine] == ["report", "checkpoint", "report", "report"], mine
            ckpt, rep = mine[1], mine[2]
            assert ckpt.t0 + ckpt.length == pytest.approx(rep.t0, abs=1e-6), mine
            # from its torch.save to its report's return, as the worker timed it
            (whole,) = w["ckpt_s"]
            assert 0.9 * whole - 0.01 <= ckpt.length + rep.length <= whole + 1e-4, (mine, whole)
            opens = [e for e in events if isinstance(e, BetweenOpen) and e.pid == w["pid"]]
            assert ("report", rep.t0) in [(e.kind, e.t0) for e in opens], opens
        else:
            assert [e.kind for e in mine] == ["report"] * 3, mine
        for e, c in zip(reports, calls, strict=True):
            # inside the worker's timer of the call, less no more than the wrapper's entry
            assert 0.9 * c - 0.01 <= e.length <= c + 1e-4, (reports, calls)
        steps = sorted((e for e in events if isinstance(e, Step) and e.pid == w["pid"]),
                       key=lambda e: e.index)  # fmt: skip
        for st, mine_s in zip(steps, w["step_s"], strict=True):
            # an epoch's first step from the report's return: the sampler's epoch set, too
            assert st.t1 - st.t0 <= mine_s + 0.05, (st, mine_s)
    between = run["rep"]["steps"]["between_s"]  # the primary's, rank 0's
    assert (between["report"]["count"], between["checkpoint"]["count"]) == (3, 1), between


def test_each_ranks_data_wait_is_its_own_fetches(run) -> None:
    """``prepare_data_loader``'s wrapper reads its DataLoader one batch ahead: ``iter()``
    makes the loader's iterator and fetches the first batch, each ``next()`` the one after
    (an epoch's last: none, its iterator ends). Every DataLoader fetch, the step's data wait,
    lies inside the worker's timer of that step's ``next()`` (an epoch's first step: and of
    ``iter()``), which also holds the wrapper's own lines and an epoch's new iterator (not a
    fetch: not data wait), so it bounds the wait from above. Each fetch calls the job's
    collate_fn, which times itself, so the time in it within the timer bounds the wait from
    below; both bounds hold per step whatever the host's load (a preemption in a fetch is in
    both, one in the wrapper's lines, 24 ms once on CI, only in the timer)."""
    own, rep = run["own"], run["rep"]
    assert rep["steps"]["data_wait_source"] == "dataloader"
    for w in own["workers"]:
        steps = sorted((e for e in run["events"] if isinstance(e, Step) and e.pid == w["pid"]),
                       key=lambda e: e.index)  # fmt: skip
        assert len(steps) == len(w["fetch_s"]) == len(w["collate_s"]) == 18
        got = [(round(st.data, 5), round(c, 5), round(f, 5))
               for st, c, f in zip(steps, w["collate_s"], w["fetch_s"], strict=True)]  # fmt: skip
        # the collates each step's window held: 2 in an epoch's first, none in its last
        assert w["collates"] == [2, 1, 1, 1, 1, 0] * 3, got
        for st, collate, fetch in zip(steps, w["collate_s"], w["fetch_s"], strict=True):
            assert max(collate - 1e-4, 0.0) < st.data <= fetch + 2e-4, got


def test_ddp_all_reduces_per_rank_from_the_flight_recorder(run) -> None:
    """Ray Train sets WORLD_SIZE in a worker that imported torch long before, just before
    its process group: the recorder must still be asked for (it was not: no collectives)."""
    own, rep = run["own"], run["rep"]
    assert rep["comm"]["note"] == "", rep["comm"]
    ranks = {r["pid"]: r for r in rep["ranks"]}
    for w in own["workers"]:
        r = ranks[w["pid"]]
        assert r["comm_records_lost"] == 0, r
        ar = next(c for c in r["collectives"] if c["op"] == "all_reduce")
        # DDP's reducer: one all-reduce per bucket each step, launched in backward
        assert ar["count"] == w["steps"] * w["buckets"], ar
        (site,) = ar["sites"]
        assert site["phase"] == "backward" and site["line"].endswith("train_fn"), site
        assert "ray_train.py:" in site["line"], site
        assert r["comm_wait_s"] is not None, r


def test_idle_after_the_last_step_is_no_stall_and_nothing_is_cut_short(run) -> None:
    """Each worker's training function returns after its last report, and the process idles
    until Ray tears it down: its controller sees the function done at its next poll (every
    2 s), then kills the worker (``ray.kill``: no exit flush). The hook ends the worker's
    steps where its training thread ended (``HookClose``, from the sender's tick: within a
    few intervals of the function's return, the worker's own clock), so the idle is no
    stalled step whatever its length: 1.8 s past the last step on a loaded CI host, more
    than MIN_STALL_S in most runs (the same shape, idling until killed, is in
    test_lib_shapes.py's ``idle_after``)."""
    own, rep, events = run["own"], run["rep"], run["events"]
    last_step = {w["pid"]: 0.0 for w in own["workers"]}
    closes: dict[int, list[float]] = {pid: [] for pid in last_step}
    for e in events:
        if isinstance(e, Step) and e.pid in last_step:
            last_step[e.pid] = max(last_step[e.pid], e.t1)
        elif isinstance(e, HookClose) and e.pid in closes:
            closes[e.pid].append(e.t)
    for w in own["workers"]:
        pid = w["pid"]
        assert closes[pid], "no HookClose: the worker's steps were not ended before its kill"
        close = closes[pid][0]  # (an exit flush, where Ray let one run, sends another)
        assert last_step[pid] <= w["done_t"] <= close <= w["done_t"] + 1.0, (w["done_t"], close)
    assert rep["stalls"] == [], rep["stalls"]
    assert rep["steps"]["cut_short"] == [], rep["steps"]
    assert "last steps missing" not in run["text"] + run["summary"]
    assert " stalled" not in run["text"]  # ("installed" is in the GPU's note)


def test_rays_processes_are_named_in_the_processes_table(run) -> None:
    own, rep, text = run["own"], run["rep"], run["text"]
    rows = {p["pid"]: p for p in rep["processes"]}
    for w in own["workers"]:
        p = rows[w["pid"]]
        assert p["role"] == "rank" and p["rank"] == w["rank"], p
    names = {p["name"] for p in rep["processes"]}
    assert {"raylet", "gcs_server"} <= names, names
    table = text.split("Processes", 1)[1].split("\n\n", 1)[0].splitlines()
    labels = {ln.split()[0]: ln.split()[2] for ln in table[2:] if ln.split()}
    for w in own["workers"]:
        # its title (Ray's setproctitle), the last one seen: Ray titles a worker by the
        # task it runs ("ray::RayTrainWorker", "ray::execute._shutdown_torch" as it ends,
        # seen on a loaded host), and a command line read empty as the worker exits leaves
        # the kernel's 15 characters of it ("ray::RayTrainWo", seen once in several runs)
        assert labels[str(w["pid"])].startswith("ray::"), table
    assert labels[str(own["driver"])] == "ray_train.py", table
    assert {"raylet", "gcs_server"} <= set(labels.values()), table


def test_each_workers_wait_for_a_core_is_its_training_threads(run) -> None:
    """Ray Train runs the training function on a thread of its own; the worker's main thread
    waits in the actor's event loop. The hook names that thread and the process probe reads
    its wait for a core (it read the main thread's, which trains nothing)."""
    told = {e.pid: e.tid for e in run["events"] if isinstance(e, TrainThread)}
    for w in run["own"]["workers"]:
        assert told.get(w["pid"]) == w["tid"] != w["pid"], (told, w)
        rows = [r for e in run["events"] if isinstance(e, ProcSample)
                for r in map(proc_row, e.rows) if r is not None and r["pid"] == w["pid"]]  # fmt: skip
        assert any(r["wait_tid"] == w["tid"] and r["cpu_wait_s"] is not None for r in rows), rows
