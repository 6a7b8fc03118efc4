"""Ranks whose launcher puts no rank in their environment: ``torch.multiprocessing.spawn``
(PyTorch's DDP tutorial) and Lightning Fabric's ``launch()`` (its first rank is the process
the user started). Each is a real 2-rank gloo DDP job under ``perftop run``, checked against
what ``torch.distributed`` told each rank (``tests/workloads/launched_ranks.py``): the
report names each process by its rank, with its own steps and its DDP all-reduces, one per
step, in ``backward``. Before, both jobs listed two anonymous trainers, and the first rank
of a Fabric job read no collectives ("the recorder keeps nothing")."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from perftop.events import Between
from perftop.recording import read_events
from tests.helpers import WORKLOADS, needs, perftop

pytestmark = pytest.mark.timeout(240)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("how", ["spawn", "fabric"])
def test_ranks_made_by_their_launcher_are_named_with_their_collectives(
    how: str, tmp_path: Path
) -> None:
    if how == "fabric":
        needs("lightning")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    for _try in range(3):  # a free port another test's job took before this one's bound it
        argv = [sys.executable, str(WORKLOADS / "launched_ranks.py"), how, str(tmp_path / "own")]
        if how == "spawn":
            argv.append(str(free_port()))
        mon = subprocess.run(
            [sys.executable, "-m", "perftop", "run", "--headless", "--force", "--record",
             str(tmp_path / "r.perftop"), "--", *argv],
            cwd=tmp_path, env=env, text=True, capture_output=True, timeout=200,
            stdin=subprocess.DEVNULL)  # fmt: skip
        if "EADDRINUSE" not in mon.stderr:
            break
    assert mon.returncode == 0, mon.stderr[-3000:]
    own = {w["pid"]: w for w in (json.loads(p.read_text())
                                 for p in (tmp_path / "own").glob("rank*.json"))}  # fmt: skip
    assert sorted(w["rank"] for w in own.values()) == [0, 1]
    assert all(w["env_rank"] is None and w["world_size"] == 2 for w in own.values()), own
    rep = perftop("report", "--json", str(tmp_path / "r.perftop"), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    r = json.loads(rep.stdout)
    assert {x["pid"]: x["rank"] for x in r["ranks"]} == {p: w["rank"] for p, w in own.items()}
    for x in r["ranks"]:
        assert x["steps"] == own[x["pid"]]["steps"] == 400, x
        reduces = [c for c in x["collectives"] if c["op"] == "all_reduce"]
        # one bucket a step; the records the ring overwrote before a read are counted (its
        # 256 entries hold about half a second of this loop on a loaded machine)
        n = reduces[0]["count"]
        assert len(reduces) == 1 and n + x["comm_records_lost"] == x["steps"], x
        assert n >= x["steps"] // 2, x
        # each launched by the user's backward() inside its step
        assert [(s["phase"], s["count"]) for s in reduces[0]["sites"]] == [("backward", n)]
    roles = {p["pid"]: (p["role"], p["rank"]) for p in r["processes"]}
    assert all(roles[p] == ("rank", w["rank"]) for p, w in own.items()), roles
    assert r["comm"]["note"] == "", r["comm"]
    if how == "fabric":  # each fabric.save is a checkpoint on every rank, its whole call
        _fabric_saves(own, list(read_events(tmp_path / "r.perftop")))


def _fabric_saves(own: dict[int, dict], events: list) -> None:
    """``fabric.save`` under DDP: rank 0 writes the file, then every rank waits at Fabric's
    barrier. Each call is a checkpoint of its rank, as long as the rank's own timer of it
    (less no more than the wrapper's entry): rank 1's wait at the barrier for rank 0's
    write was its next step's, with no checkpoint on rank 1 at all, and rank 0's wait
    there too."""
    for pid, w in own.items():
        mine = [e for e in events if isinstance(e, Between) and e.pid == pid]
        assert [e.kind for e in mine] == ["checkpoint"] * len(w["save_s"]) == ["checkpoint"] * 4
        for e, c in zip(mine, w["save_s"], strict=True):
            assert 0.9 * c - 0.01 <= e.length <= c + 1e-4, (w["rank"], mine, w["save_s"])
