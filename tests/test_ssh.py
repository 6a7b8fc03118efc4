"""`perftop collect --ssh HOST -- CMD`: a remote job's session over ssh's own channel.
``PERFTOP_SSH`` points at a stand-in that runs the "remote" command here, as ssh would
there; ``PERFTOP_REMOTE`` says how to start perftop on the remote."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import WORKLOADS, perftop

FAKE_SSH = str(WORKLOADS / "fake_ssh")


def _collect(tmp_path, remote: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFTOP_SSH": FAKE_SSH, "PERFTOP_REMOTE": remote}
    return subprocess.run(
        [sys.executable, "-m", "perftop", "collect", "--headless", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_remote_job_through_ssh(tmp_path):
    rec = tmp_path / "ssh.perftop"
    there = tmp_path / "there"
    there.mkdir()
    p = _collect(tmp_path, f"{sys.executable} -m perftop", "--record", str(rec),
                 "--ssh", "me@gpu1", "--remote-dir", str(there), "--remote-record", "r.perftop",
                 "--", sys.executable, str(WORKLOADS / "no_loader.py"))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "[gpu1] no loader done" in p.stderr  # the remote job's output reaches us
    assert p.stdout == ""
    # Recorded on the remote only as asked, in the remote directory, with the job's output.
    assert sorted(tmp_path.rglob("*.perftop")) == [rec, there / "r.perftop"]
    remote = json.loads(perftop("report", "--json", str(there / "r.perftop"), cwd=tmp_path).stdout)
    assert remote["steps"]["count"] == 20
    r = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    assert [(n["name"], n["state"]) for n in r["nodes"]] == [("gpu1", "exited (0)")]
    assert [(x["host"], x["steps"]) for x in r["ranks"]] == [("gpu1", 20)]
    assert r["command"][:4] == ["perftop", "collect", "--ssh", "me@gpu1"]


def test_remote_without_perftop_is_one_line(tmp_path):
    p = _collect(tmp_path, "/nonexistent/perftop", "--no-record", "--ssh", "gpu1", "--",
                 "python", "-c", "pass")  # fmt: skip
    assert p.returncode == 4  # ssh failures: one exit code across ls, attach, collect
    lines = [x for x in p.stderr.splitlines() if "perftop is not installed" in x]
    assert len(lines) == 1 and "PERFTOP_REMOTE" in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_remote_with_another_format_is_one_line(tmp_path):
    p = _collect(tmp_path, f"{sys.executable} {WORKLOADS / 'future_perftop.py'}",
                 "--no-record", "--ssh", "gpu1", "--", "python", "-c", "pass")  # fmt: skip
    assert p.returncode == 4  # ssh failures: one exit code across ls, attach, collect
    assert "gpu1: the remote perftop writes format 99; this one reads up to 1" in p.stderr
    assert "Traceback" not in p.stderr


def test_stream_out_writes_only_the_session_to_stdout(tmp_path):
    from perftop.recording import read_events

    p = subprocess.run(
        [sys.executable, "-m", "perftop", "run", "--stream-out", "--no-record", "--",
         sys.executable, str(WORKLOADS / "explicit_api.py")],
        cwd=tmp_path, capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = tmp_path / "stream.perftop"
    out.write_bytes(p.stdout)  # the stream is a recording's bytes
    steps = [e for e in read_events(out) if type(e).__name__ == "Step"]
    assert len(steps) == 10


def test_collect_exits_with_the_worst_remote_exit_code(tmp_path):
    from types import SimpleNamespace

    from perftop.flows.collect import exit_code

    p = _collect(tmp_path, f"{sys.executable} -m perftop", "--no-record", "--ssh", "gpu1",
                 "--ssh", "gpu2", "--", sys.executable, "-c", "import sys; sys.exit(2)")  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert "exited with" not in p.stderr
    node = lambda code, error="": SimpleNamespace(job_exit=code, error=error)  # noqa: E731
    assert exit_code([node(0), node(3), node(None)]) == 3  # None: still running
    assert exit_code([node(0), node(None, "ssh could not connect")]) == 4
    assert exit_code([]) == 0
