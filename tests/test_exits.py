"""How the job's processes ended: the pidfd watch on real processes (an exit code, a
SIGKILL, read from the zombie before its parent reaps it), the model's order of the
abnormal ends, and a real DDP job whose rank 1 is killed with SIGKILL (as the kernel's OOM
killer would), its launcher then stopping rank 0: perftop says rank 1 ended first."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from perftop.events import Hello, HookClose, ProcExit, ProcSample, Step
from perftop.events.probes import PROC_FIELDS
from perftop.model import Session
from perftop.model.fleet import FleetSession
from perftop.model.stands import ABRUPT, abnormal_ends, end_words
from perftop.probes import exits
from perftop.probes.cpulimit import read_cgroups
from perftop.probes.exits import ExitWatch
from perftop.probes.oomcount import OomCounts, oom_kills
from perftop.report.build import cut_short_text
from perftop.wire import HEADER, Frame, decode_frame, encode_frame, encode_node_frame
from tests.helpers import WORKLOADS, new_cgroup, run_and_report

TORCHRUN = shutil.which("torchrun", path=str(Path(sys.executable).parent))

# Two children: one exits with code 3, one is killed by SIGKILL; the parent reaps them
# only 1.5 s later, so each is a zombie until then (as torchrun's 0.1 s poll leaves them).
PARENT = """
import os, signal, subprocess, sys, time
a = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.4); raise SystemExit(3)"])
b = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
print(a.pid, b.pid, flush=True)
time.sleep(0.8)
os.kill(b.pid, signal.SIGKILL)
time.sleep(1.5)
a.wait(); b.wait()
"""


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this OS")
def test_a_childs_exit_code_and_a_sigkill_are_read_as_they_end_whoever_the_parent():
    """Not the watcher's children: their parent reaps them. Each end is seen as it comes,
    in order, with its status, once (a zombie still in the tree at the next tick is not
    watched again); a pid already gone is not watched and says nothing."""
    got: list[ProcExit] = []
    w = ExitWatch(got.append)
    top = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert top.stdout is not None
        a, b = map(int, top.stdout.readline().split())
        t0 = time.time()
        w.watch([a, b])
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        w.watch([gone.pid])  # reaped already: nothing to open
        _until(lambda: len(got) == 2, 30)
        w.watch([a, b])  # the next tick: zombies still, their parent has not reaped them
        time.sleep(0.3)
        top.wait(30)
    finally:
        top.kill()
        w.close()
    assert [(e.pid, e.status) for e in got] == [(a, 3 << 8), (b, 9)], got
    assert t0 < got[0].t < got[1].t < t0 + 10  # the code at ~0.4 s, the kill at ~0.8 s


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this OS")
def test_past_its_bound_the_watch_keeps_the_tree_nearest_the_root(monkeypatch):
    """At most ``MAX_WATCHED`` pidfds: those of the first pids of the tick's tree (the
    root's first, a walk from the root), whatever their numbers."""
    monkeypatch.setattr(exits, "MAX_WATCHED", 2)
    got: list[ProcExit] = []
    w = ExitWatch(got.append)
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
             for _ in range(3)]  # fmt: skip
    try:
        tree = sorted((p.pid for p in procs), reverse=True)  # the highest pid first
        w.watch(tree)
        for p in procs:
            p.kill()
        _until(lambda: len(got) == 2, 10)
        time.sleep(0.2)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        w.close()
    assert sorted(e.pid for e in got) == sorted(tree[:2]), (got, tree)


def test_an_end_by_another_signal_is_no_oom_kills_victim_and_claims_none(tmp_path):
    """The OOM killer sends SIGKILL only: a rank stopped by SIGTERM as its cgroup counted a
    kill (before the victim's own end was seen) says 0 and leaves the kill to the victim;
    one kill is claimed once. (A file in a cgroup's format stands for its count.)"""
    events = tmp_path / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    counts = OomCounts()
    counts.tick({str(events)})
    events.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert counts.at_end(str(events), claim=False)[:2] == (0, "memory.events")  # SIGTERM
    assert counts.at_end(str(events), claim=True)[:2] == (1, "memory.events")  # SIGKILL
    assert counts.at_end(str(events), claim=True)[:2] == (0, "memory.events")  # claimed


def _rank(s: Session, rank: int, pid: int, close: bool) -> None:
    s.apply_all(_rank_events(rank, pid, close))


def _rank_events(rank: int, pid: int, close: bool) -> list:
    """A rank's hook: its hello, 5 steps and, where ``close``, its last send."""
    hello = Hello(1000.0, pid, 1, "h", ("train.py",), rank=rank, world_size=2, closes=True)
    steps = [Step(pid, i, 1000.0 + i, 1000.5 + i) for i in range(5)]
    return [hello, *steps, *([HookClose(1006.0, pid)] if close else [])]


def _row(pid: int) -> tuple:
    row = dict.fromkeys(PROC_FIELDS) | {"pid": pid, "name": "python", "rss": 1}
    return tuple(row[f] for f in PROC_FIELDS)


def test_the_first_abnormal_end_leads_and_a_rank_gone_without_a_goodbye_is_one():
    """Rank 1 ended first with no status read (its parent reaped it first) and no last send
    from its hook: abrupt, named first; rank 0, killed by SIGTERM 0.12 s later, follows it;
    a worker's clean exit and a rank whose hook said goodbye are no abnormal end."""
    s = Session()
    _rank(s, 0, 100, close=True)
    _rank(s, 1, 101, close=False)
    s.apply(ProcSample(1005.0, 1.0, 90, tuple(_row(p) for p in (90, 100, 101, 102))))
    s.apply(ProcExit(1006.00, 101, None))
    s.apply(ProcExit(1006.05, 102, 0))  # a worker's clean exit
    s.apply(ProcExit(1006.12, 100, 15))
    snap = s.snapshot(window=None)
    ends = abnormal_ends(snap)
    assert [p.pid for p in ends] == [101, 100]
    said = end_words(snap, ends[0], ends[0])
    assert said.startswith(f"rank 1 (pid 101) {ABRUPT}: killed by a signal (SIGKILL"), said
    after = "rank 0 (pid 100) killed by SIGTERM, 0.12 s after rank 1"
    assert end_words(snap, ends[1], ends[0]) == after
    row = next(p for p in snap.processes if p.pid == 100)
    assert not row.alive and row.exit_signal == 15 and row.exit_code is None


def test_a_nodes_clean_end_is_not_made_abrupt_by_another_nodes_trainer_of_the_same_pid():
    """Containers on two nodes often give their trainers one pid: on a collector, node b's
    rank that said goodbye and ended (its status reaped by its parent) is not made an
    abnormal end by node a's rank of that pid, which has not said goodbye yet; node a's own
    end without one is an abnormal end."""
    fleet = FleetSession()

    def node(name: str, events: list) -> None:
        frame = Frame(0, encode_frame(events)[HEADER.size :])
        fleet.apply_all(decode_frame(encode_node_frame(name, frame))[0])

    sample = ProcSample(1005.0, 1.0, 90, (_row(100),))
    node("a", [*_rank_events(0, 100, close=False), sample])  # still training
    node("b", [*_rank_events(1, 100, close=True), sample, ProcExit(1006.5, 100, None)])
    snap = fleet.snapshot(window=None)
    assert abnormal_ends(snap) == []
    (b,) = snap.ended
    assert end_words(snap, b) == "rank 1 (pid 100 on b) ended", end_words(snap, b)
    node("a", [ProcExit(1007.0, 100, None)])
    snap = fleet.snapshot(window=None)
    ends = abnormal_ends(snap)
    assert [(p.host, p.pid) for p in ends] == [("a", 100)], ends
    assert snap.unclosed_at == (("a", 100),)  # the text says which node's pid 100
    said = cut_short_text(snap.unclosed, [host for host, _ in snap.unclosed_at])
    assert said.startswith("pid 100 on a ended without perftop's last send"), said


def _rank_killed(tmp_path: Path, **env: str) -> tuple[dict, dict, str]:
    """The real DDP job (tests/workloads/rank_killed.py): (its report, rank 1's abnormal
    end, the headless output)."""
    proc, r = run_and_report(
        tmp_path, "env", *(f"{k}={v}" for k, v in env.items()), TORCHRUN or "torchrun",
        "--standalone", "--nproc_per_node=2", str(WORKLOADS / "rank_killed.py"),
    )  # fmt: skip
    assert proc.returncode != 0
    pids = {int(k): int(v) for k, v in re.findall(r"pid (\d) (\d+)", proc.stdout)}
    assert sorted(pids) == [0, 1], proc.stdout
    first = r["abnormal_ends"][0]
    assert first["pid"] == pids[1], r["abnormal_ends"]
    head = f"rank 1 (pid {pids[1]}) "
    # its status read from its zombie, or reaped by torchrun first: abrupt (no goodbye)
    assert first["words"].startswith((head + "killed by SIGKILL: ", head + ABRUPT + ": "))
    assert first["exit_signal"] in ("SIGKILL", None)
    for e in r["abnormal_ends"][1:]:  # rank 0 and its like, stopped after it
        assert e["words"].endswith(" after rank 1"), e
    assert f"perftop: {head}" in proc.stderr, proc.stderr
    rank1 = next(p for p in r["processes"] if p["pid"] == pids[1])
    assert rank1["ended_t"] is not None
    assert rank1["ended_t"] <= min(e["ended_t"] for e in r["abnormal_ends"])
    return r, first, proc.stderr


@pytest.mark.skipif(TORCHRUN is None, reason="no torchrun")
def test_a_rank_killed_by_sigkill_is_said_first_and_its_launchers_stop_after_it(tmp_path):
    """A real DDP job (gloo, 2 ranks): rank 1 kills itself with SIGKILL after 60 steps;
    torchrun then stops rank 0. The headless line and the report name rank 1 first (killed
    by SIGKILL where its zombie was read in time, else ended abruptly: its hook never said
    goodbye), then rank 0, after it; not the OOM killer: its memory cgroup (the host, where
    it is in the root one) counted none."""
    _, first, _ = _rank_killed(tmp_path)
    if first["oom_kills"] is not None:  # (/proc/vmstat, Linux 4.13)
        assert first["oom_kills"] == 0, first
        said = re.search(r": not the OOM killer \((its memory cgroup|the host) counted no OOM "
                         r"kill as it ended", first["words"])  # fmt: skip
        assert said, first
        counters = ("/proc/vmstat", "memory.events.local", "memory.events", "memory.oom_control")
        assert first["oom_counted_by"] in counters, first


def memory_limited(limit: int) -> contextlib.AbstractContextManager[Path]:
    """A new memory cgroup of ``limit`` bytes, no swap (v2 ``memory.max``, or v1's limit),
    removed after; skips where this machine lets no one make one."""
    return new_cgroup("memory", ("memory",),
                      {"memory.max": str(limit), "memory.swap.max": "0"},
                      {"memory.limit_in_bytes": str(limit),
                       "memory.memsw.limit_in_bytes": str(limit)})  # fmt: skip


@pytest.mark.skipif(TORCHRUN is None, reason="no torchrun")
@pytest.mark.skipif(oom_kills() is None, reason="no OOM kill count (/proc/vmstat) here")
def test_a_rank_the_oom_killer_takes_is_said_taken_by_it(tmp_path):
    """The same job, rank 1 in a memory cgroup of 128 MiB where it takes 4 GiB: the
    kernel's OOM killer kills it (for real). perftop says it was the OOM killer: its memory
    cgroup counted an OOM kill as it ended."""
    with memory_limited(128 * 2**20) as cg:
        r, first, err = _rank_killed(tmp_path, OOM_CGROUP=str(cg), KILL_AT="150")
    assert first["oom_kills"] and first["oom_kills"] >= 1, repr(first)
    # rank 0 and its like, stopped after it (SIGTERM): the one kill is rank 1's alone
    assert all(e["oom_kills"] in (0, None) for e in r["abnormal_ends"][1:]), r["abnormal_ends"]
    said = ": the kernel's OOM killer took it, memory ran out (its memory cgroup counted an OOM"
    assert said in first["words"], first
    assert said in err, err


def _until(done: Callable[[], bool], timeout: float) -> None:
    end = time.monotonic() + timeout
    while not done() and time.monotonic() < end:
        time.sleep(0.05)


# Moves itself into the cgroup named on its command line, says so, then waits for a line:
# "hog" takes memory until it is killed; anything else, it sleeps until it is.
IN_CGROUP = """
import sys, time
with open(sys.argv[1] + "/cgroup.procs", "w") as f:
    f.write("0")
print("in", flush=True)
if sys.stdin.readline().strip() == "hog":
    kept = []
    while True:
        kept.append(bytearray(8 * 2**20))  # each page written
time.sleep(60)
"""


def _oom_then_kill_9(
    hog_cg: Path, our_cg: Path, watch_hog: bool
) -> tuple[dict[str, int], dict[int, ProcExit], dict[int, str]]:
    """A process in ``hog_cg`` takes memory until the OOM killer takes it; half a second
    after, ours in ``our_cg`` gets a kill -9. The watch sees ours (and the hog, where
    ``watch_hog``): (pids by name, each end seen, each one's words as perftop says them)."""
    got: list[ProcExit] = []
    w = ExitWatch(got.append)
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", IN_CGROUP, str(cg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name, cg in (("hog", hog_cg), ("ours", our_cg))
    }
    try:
        for p in procs.values():
            assert p.stdout is not None and p.stdout.readline() == "in\n"
        pids = {name: p.pid for name, p in procs.items()}
        files = {pid: f for pid in pids.values() if (f := read_cgroups(pid)[1])}
        assert files[pids["ours"]].startswith(f"{our_cg}/memory."), files
        host_before = oom_kills() or 0
        w.watch([pids["ours"], *([pids["hog"]] if watch_hog else [])], files)
        hog = procs["hog"]
        assert hog.stdin is not None
        hog.stdin.write("hog\n")
        hog.stdin.flush()
        _until(lambda: (oom_kills() or 0) > host_before, 60)
        _until(lambda: len(got) == watch_hog, 10)  # (none is reaped before its end is read)
        time.sleep(0.5)
        os.kill(pids["ours"], 9)
        _until(lambda: len(got) == 1 + watch_hog, 10)
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
        w.close()
    assert (oom_kills() or 0) > host_before  # the host did count the hog's
    s = Session()
    s.apply(ProcSample(got[0].t - 1, 1.0, 90, tuple(_row(p) for p in pids.values())))
    s.apply_all(got)
    snap = s.snapshot(window=None)
    return pids, {e.pid: e for e in got}, {p.pid: end_words(snap, p) for p in abnormal_ends(snap)}


KILL_9 = "killed by SIGKILL: not the OOM killer (its memory cgroup counted no OOM kill as it ended"
BY_CGROUP = "the kernel's OOM killer took it, memory ran out (its memory cgroup counted an OOM kill"


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this OS")
@pytest.mark.skipif(oom_kills() is None, reason="no OOM kill count (/proc/vmstat) here")
def test_an_oom_kill_in_another_cgroup_is_not_the_cause_of_a_kill_9_beside_it():
    """A shared machine: another user's process (its own memory cgroup of 64 MiB) is taken
    by the OOM killer, and half a second later ours (in a cgroup of its own) gets a kill -9.
    The host counted an OOM kill in that window; ours is weighed against its own cgroup's
    count: not the OOM killer, and the host's kill said to be another cgroup's."""
    with memory_limited(64 * 2**20) as other_cg, memory_limited(2**30) as our_cg:
        pids, ends, words = _oom_then_kill_9(other_cg, our_cg, watch_hog=False)
    ours = ends[pids["ours"]]
    assert (ours.status, ours.oom_kills) == (9, 0) and ours.host_oom_kills, ours
    said = f"{KILL_9}; the host counted {ours.host_oom_kills}, in another cgroup): a kill -9 "
    assert said in words[pids["ours"]], words


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this OS")
@pytest.mark.skipif(oom_kills() is None, reason="no OOM kill count (/proc/vmstat) here")
def test_one_oom_kill_is_one_victim_not_every_process_of_its_cgroup_that_ends_after_it():
    """Two processes of one job in one memory cgroup of 64 MiB: the OOM killer takes one,
    then the other gets a kill -9 (as a training process's other workers end when one was
    taken). The cgroup counted one kill in the window of both: the first end claims it."""
    with memory_limited(64 * 2**20) as cg:
        pids, ends, words = _oom_then_kill_9(cg, cg, watch_hog=True)
    hog, ours = ends[pids["hog"]], ends[pids["ours"]]
    assert hog.status == 9 and hog.oom_kills and hog.oom_source == ours.oom_source, hog
    assert BY_CGROUP in words[pids["hog"]], words
    assert (ours.status, ours.oom_kills, ours.host_oom_kills) == (9, 0, 0), ours
    assert f"{KILL_9}): a kill -9 " in words[pids["ours"]], words


def test_the_tui_says_the_first_abnormal_end_once_and_the_table_how_each_ended():
    """A notice names the first process to end abnormally (once: what followed it is the
    report's); the Processes table says each end it read before the command
    (``[SIGTERM] train.py``, ``[OOM kill] train.py`` where an OOM kill was counted as a
    process ended whose status its parent reaped first), struck through as any exited
    process."""
    import asyncio

    from perftop.tui.messages import SnapshotMessage
    from perftop.tui.widgets import ProcessesPanel
    from tests.tui.test_app import settle, showing

    s = Session()
    _rank(s, 0, 100, close=True)
    _rank(s, 1, 101, close=False)
    s.apply(ProcSample(1005.0, 1.0, 90, tuple(_row(p) for p in (100, 101, 102))))
    s.apply(ProcExit(1006.00, 101, 9))
    s.apply(ProcExit(1006.12, 100, 15))
    s.apply(ProcExit(1006.20, 102, None, 1, "memory.events"))  # reaped first, as an OOM kill

    async def main() -> None:
        async with showing(s.snapshot()) as (app, pilot):
            app.post_message(SnapshotMessage(s.snapshot()))
            await settle(pilot)
            notes = [n.message for n in app._notifications]
            said = [n for n in notes if "(pid 10" in n]
            assert said == [end_words(s.snapshot(), abnormal_ends(s.snapshot())[0])], notes
            assert said[0].startswith("rank 1 (pid 101) killed by SIGKILL: the kernel's OOM")
            table = app.query_one(ProcessesPanel).table
            assert table.get_cell("100", "name").plain == "[SIGTERM] python"
            assert table.get_cell("102", "name").plain == "[OOM kill] python"

    asyncio.run(main())


OOM_MAIN = """
import os, time, torch
with open(os.environ["OOM_CGROUP"] + "/cgroup.procs", "w") as f:
    f.write(str(os.getpid()))
time.sleep(2.5)  # placed as it starts, as a scheduler would: the probe reads where, each 1 s
m = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
hog = []
for step in range(100_000):
    loss = m(torch.randn(4, 8)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step > 50 and step % 10 == 0:
        hog.append(bytearray(8 * 2**20))  # 8 MiB a time, each page written
"""


@pytest.mark.skipif(oom_kills() is None, reason="no OOM kill count (/proc/vmstat) here")
def test_a_single_process_job_the_oom_killer_takes_is_said_taken_by_it(tmp_path):
    """The commonest case: one training process in a memory cgroup of 400 MiB takes more
    until the OOM killer takes it. The job's own process is named (its status is the
    monitor's, its parent's), and the OOM killer measured, in the line and the report."""
    job = tmp_path / "oom_main.py"
    job.write_text(OOM_MAIN)
    with memory_limited(400 * 2**20) as cg:
        proc, r = run_and_report(tmp_path, "env", f"OOM_CGROUP={cg}", sys.executable, str(job))
    (end,) = r["abnormal_ends"]
    assert end["exit_signal"] == "SIGKILL" and end["oom_kills"], end
    assert (
        end["words"].startswith("main (pid ") and "the kernel's OOM killer took it" in end["words"]
    )
    # headless, the job's own end is its summary's first line: with what most likely sent it
    said = next(ln for ln in proc.stderr.splitlines() if ln.startswith("perftop: killed (SIGKILL"))
    assert said.endswith(end["words"].split(") killed by SIGKILL", 1)[1]), said


OOM_WORKER = """
import os, time, torch
from torch.utils.data import DataLoader, Dataset
with open(os.environ["OOM_CGROUP"] + "/cgroup.procs", "w") as f:
    f.write(str(os.getpid()))  # its workers are forked into it too


class Leaky(Dataset):
    def __init__(self):
        self.kept = []

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        if i > 400:  # a leak in the worker, each page written, over a few seconds (a
            self.kept.append(bytearray(2**19))  # worker that lives under a probe tick may
            time.sleep(0.003)  # end unseen: docs/distributed.md)
        return torch.randn(16), torch.randn(1)


m = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for x, y in DataLoader(Leaky(), batch_size=8, num_workers=1):
    loss = (m(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.skipif(oom_kills() is None, reason="no OOM kill count (/proc/vmstat) here")
def test_a_dataloader_worker_the_oom_killer_takes_is_named_where_torch_says_killed(tmp_path):
    """The classic: a DataLoader worker that leaks, in a memory cgroup of 700 MiB, until the
    OOM killer takes it; PyTorch raises "DataLoader worker (pid N) is killed by signal:
    Killed." in the training process. perftop names the worker and the OOM killer."""
    job = tmp_path / "oom_worker.py"
    job.write_text(OOM_WORKER)
    with memory_limited(700 * 2**20) as cg:
        proc, r = run_and_report(tmp_path, "env", f"OOM_CGROUP={cg}", sys.executable, str(job))
    assert "is killed by signal: Killed" in proc.stdout + proc.stderr
    (end,) = r["abnormal_ends"]
    worker = next(p for p in r["processes"] if p["pid"] == end["pid"])
    # its status read from its zombie, or reaped first by the training process (its SIGCHLD
    # handler polls its workers): the OOM kill the host counted as it ended says it
    assert worker["role"] == "worker" and worker["exit_signal"] in ("SIGKILL", None), worker
    assert end["words"].startswith(f"worker 0 (pid {end['pid']}) "), end
    assert ": the kernel's OOM killer took it, memory ran out" in end["words"], end
