"""`perftop attach --ssh HOST TARGET` and `perftop ls --ssh HOST` through the ssh stand-in
(``PERFTOP_SSH`` runs the "remote" command here): a real headless session of a training,
seen from "another machine" over ssh's standard output, no port opened."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from tests.helpers import WORKLOADS, perftop, spawn_slow_job, until_step

FAKE_SSH = str(WORKLOADS / "fake_ssh")


def _ssh(tmp_path, remote: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFTOP_SSH": FAKE_SSH, "PERFTOP_REMOTE": remote}
    return subprocess.run(
        [sys.executable, "-m", "perftop", *args], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _stream_outs(job_pid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "--stream-out" in cmd and "attach" in cmd and cmd[-1] == str(job_pid):
            out.append(p)
    return out


@pytest.fixture(scope="module")
def mon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen[str]]:
    """One headless `perftop run` of a slow training, 50 steps in, for the tests here that
    only watch it (ls, attach); ended when they are done."""
    mon = spawn_slow_job(tmp_path_factory.mktemp("job"), "--no-record")
    try:
        until_step(mon, 50)
        yield mon
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=30)


def test_attach_and_ls_over_ssh(tmp_path, mon):
    here = f"{sys.executable} -m perftop"
    ls = _ssh(tmp_path, here, "ls", "--ssh", "me@gpu1", "--json")
    assert ls.returncode == 0, ls.stderr
    mine = [s for s in json.loads(ls.stdout)["sessions"] if s["monitor_pid"] == mon.pid]
    assert len(mine) == 1
    job = mine[0]["job_pid"]
    table = _ssh(tmp_path, here, "ls", "--ssh", "me@gpu1")
    assert table.returncode == 0, table.stderr
    assert "perftop attach --ssh me@gpu1 PID or SOCKET" in table.stdout
    assert mine[0]["socket"] in table.stdout and str(job) in table.stdout
    rec = tmp_path / "over-ssh.perftop"
    att = _ssh(tmp_path, here, "attach", "--ssh", "me@gpu1", str(job), "--headless",
               "--duration", "2", "--record", str(rec))  # fmt: skip
    assert att.returncode == 0, att.stderr
    assert att.stdout == "" and "Traceback" not in att.stderr
    assert mon.poll() is None  # the job goes on undisturbed
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    assert rep["command"][:4] == ["perftop", "attach", "--ssh", "me@gpu1"]
    ranks = [(r["host"], r["pid"]) for r in rep["ranks"]]
    assert ranks == [("gpu1", job)]
    # The stream starts with the session's history: more steps than 2 s of live ones.
    assert rep["ranks"][0]["steps"] > mine[0]["steps"] > 10
    # Closing our end of "ssh" ends the remote attach too: nothing is left behind.
    deadline = time.time() + 15
    while _stream_outs(job) and time.time() < deadline:
        time.sleep(0.2)
    assert _stream_outs(job) == []


def test_the_duration_counts_from_the_link_not_from_ssh_starting(tmp_path, mon):
    """ssh can take longer than ``--duration`` to log in (a slow handshake, a loaded
    host): the headless watch then still gets the session's history and its seconds."""
    slow = f"sleep 3; {sys.executable} -m perftop"
    job = json.loads(_ssh(tmp_path, slow, "ls", "--ssh", "me@gpu1", "--json").stdout)
    mine = [s for s in job["sessions"] if s["monitor_pid"] == mon.pid][0]
    rec = tmp_path / "slow.perftop"
    att = _ssh(tmp_path, slow, "attach", "--ssh", "me@gpu1", str(mine["job_pid"]),
               "--headless", "--duration", "1", "--record", str(rec))  # fmt: skip
    assert att.returncode == 0, att.stderr
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    assert rep["ranks"][0]["steps"] > mine["steps"] > 10


def test_attach_stream_out_writes_only_the_stream(tmp_path, mon):
    from perftop.recording import read_events

    p = subprocess.run(
        [sys.executable, "-m", "perftop", "attach", "--stream-out", "--duration", "1",
         str(mon.pid)],
        cwd=tmp_path, capture_output=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = tmp_path / "stream.perftop"
    out.write_bytes(p.stdout)  # a recording's bytes
    steps = [e for e in read_events(out) if type(e).__name__ == "Step"]
    assert len(steps) > 10


def test_remote_without_perftop_is_one_line(tmp_path):
    for cmd in (("attach", "--ssh", "gpu1", "123", "--headless"), ("ls", "--ssh", "gpu1")):
        p = _ssh(tmp_path, "/nonexistent/perftop", *cmd)
        assert p.returncode == 4
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1, p.stderr
        assert "perftop is not installed" in lines[0] and "PERFTOP_REMOTE" in lines[0]


def test_remote_with_another_format_is_one_line(tmp_path):
    p = _ssh(tmp_path, f"{sys.executable} {WORKLOADS / 'future_perftop.py'}",
             "attach", "--ssh", "gpu1", "123", "--headless")  # fmt: skip
    assert p.returncode == 4  # ssh failures: one exit code across ls, attach, collect
    assert p.stderr.strip().splitlines() == [
        "perftop: gpu1: the remote perftop writes format 99; this one reads up to 1 "
        "(use the same perftop version on both sides)"
    ]
