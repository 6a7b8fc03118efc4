"""The job's process under perftop (issue 28): recording names two runs cannot share."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from perftop.monitor import outfiles
from perftop.recording import default_path
from tests.helpers import perftop, spawn_slow_job, until_step


def test_default_names_are_unique_and_created_exclusively(tmp_path):
    """Runs started in the same second (here: names of this half-minute already taken)
    each get a name of their own, in the readable form, instead of refusing to start."""
    now = time.time()
    taken = {str(default_path(now + d)) for d in range(-1, 30)}
    for name in taken:
        (tmp_path / name).write_bytes(b"someone else's")
    r = perftop("run", "--headless", "python", "-c", "pass", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    new = [p for p in tmp_path.glob("perftop-*.perftop") if p.name not in taken]
    assert len(new) == 1, sorted(p.name for p in tmp_path.iterdir())
    assert re.fullmatch(r"perftop-\d{8}-\d{6}-2\.perftop", new[0].name)
    assert str(new[0].name) in r.stderr  # the summary names the file it wrote
    assert all((tmp_path / n).read_bytes() == b"someone else's" for n in taken)
    assert perftop("report", "--json", str(new[0]), cwd=tmp_path).returncode == 0


def test_force_never_shares_a_live_recording(tmp_path):
    """--force on the file a live session records to is a clear one-line error: that
    session's recording stays whole. Once it has ended, --force overwrites as asked."""
    rec = tmp_path / "r.perftop"
    mon = spawn_slow_job(tmp_path, "--record", str(rec))
    try:
        until_step(mon, 50)
        r = perftop("run", "--headless", "--force", "--record", str(rec), "true", cwd=tmp_path)
        assert r.returncode == 3, r.stderr
        assert "a live perftop session is recording to it" in r.stderr
        assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
        until_step(mon, 100)
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=60)
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    assert rep["steps"]["count"] >= 100
    r = perftop("run", "--headless", "--force", "--record", str(rec), "true", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


# -- the job's output files (item 2) ---------------------------------------------------


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``where``: a disk that fills up (needs root)."""
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)])
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs (not root?)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _under_perftop(tmpdir: Path, code: str, **popen: Any) -> subprocess.Popen[str]:
    """`perftop run --stream-out --no-record -- python -c CODE` with TMPDIR=tmpdir: the
    job's output goes through perftop's files, relayed to our stderr."""
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.Popen(
        [sys.executable, "-m", "perftop", "run", "--stream-out", "--no-record", "--",
         sys.executable, "-c", code],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, text=True, **popen,
    )  # fmt: skip


def test_output_files_stay_small_on_a_small_disk(tmp_path):
    """20 MB of output through a 4 MB TMPDIR: every line arrives, the job exits 0 (it
    died of its own print's ENOSPC when the files kept everything)."""
    with small_tmpfs(tmp_path / "t", "4m") as tmpdir:
        out = tmp_path / "relayed.txt"
        code = "for i in range(200000): print('x' * 99)"
        with out.open("w") as f:
            mon = _under_perftop(tmpdir, code, stderr=f)
            assert mon.wait(timeout=300) == 0
        lines = out.read_text().splitlines()
        assert lines.count("x" * 99) == 200000
        assert not list(tmpdir.glob("perftop-out-*"))  # removed at the end


def test_a_killed_monitor_never_fills_the_disk_under_the_job(tmp_path):
    """kill -9 of the monitor: the job writes 24 MB more into an 8 MB TMPDIR and finishes;
    the keeper punches out what it writes and removes the files once the job is gone."""
    marker = tmp_path / "end"
    code = (
        "import time\n"
        "print('first', flush=True)\n"
        "for i in range(384):\n"
        "    print('y' * 65535, flush=True)\n"
        "    time.sleep(0.015)\n"
        f"open({str(marker)!r}, 'w').write('ok')\n"
    )
    with small_tmpfs(tmp_path / "t", "8m") as tmpdir:
        mon = _under_perftop(tmpdir, code, stderr=subprocess.PIPE)
        assert mon.stderr is not None
        while mon.stderr.readline().strip() != "first":
            pass
        job = [p for p in psutil.Process(mon.pid).children() if "-c" in p.cmdline()]
        assert len(job) == 1
        mon.kill()
        mon.wait()
        gone, alive = psutil.wait_procs(job, timeout=240)
        assert not alive
        assert marker.read_text() == "ok"  # the job wrote its last line and went on
        deadline = time.monotonic() + 30
        while list(tmpdir.glob("perftop-out-*")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not list(tmpdir.glob("perftop-out-*"))


def test_ls_cleans_output_files_left_behind(tmp_path):
    """Files no monitor or keeper owns any more: `perftop ls` removes them, or truncates
    one a live process still writes to; a live session's files are left alone."""
    left = tmp_path / "perftop-out-left"
    live = tmp_path / "perftop-out-live"
    for d in (left, live):
        d.mkdir()
        (d / "lock").touch()
        for name in ("stdout.log", "stderr.log"):
            (d / name).write_bytes(b"z" * 100_000)
    owner = outfiles.hold(str(live))  # a live monitor's shared lock
    held = (left / "stderr.log").open("ab")  # a job that still writes there
    try:
        env = {**os.environ, "TMPDIR": str(tmp_path)}
        r = subprocess.run([sys.executable, "-m", "perftop", "ls"], env=env, text=True,
                           capture_output=True, timeout=120, cwd=tmp_path)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert "cleaned 2 job output file(s)" in r.stderr
        assert not (left / "stdout.log").exists()
        assert (left / "stderr.log").stat().st_size == 0
        assert all((live / n).stat().st_size == 100_000 for n in ("stdout.log", "stderr.log"))
    finally:
        held.close()
        os.close(owner)
    r = subprocess.run([sys.executable, "-m", "perftop", "ls"], env=env, text=True,
                       capture_output=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and not left.exists() and not live.exists()
