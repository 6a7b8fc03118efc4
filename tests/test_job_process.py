"""The job's process under perftop (issue 28): recording names two runs cannot share, output
files that never fail or fill a disk under the job, a killed wrapper that does not end the
session, and a bootstrap that costs a Python child nothing until it imports torch."""

from __future__ import annotations

import contextlib
import json
import math
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
from perftop.monitor.jobenv import hook_env
from perftop.recording import default_path
from tests.helpers import listening, perftop, spawn_slow_job, until_step


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
    session's recording stays whole. Once it has ended, --force overwrites as asked. The
    session ends by SIGTERM to perftop, which reaches the job: it dies of it, recorded."""
    rec = tmp_path / "r.perftop"
    mon = spawn_slow_job(tmp_path, "--record", str(rec))
    try:
        until_step(mon, 50)
        r = perftop("run", "--headless", "--force", "--record", str(rec), "true", cwd=tmp_path)
        assert r.returncode == 3, r.stderr
        assert "a live perftop session is recording to it" in r.stderr
        assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
        until_step(mon, 100)
        mon.send_signal(signal.SIGTERM)
        _, err = mon.communicate(timeout=60)
    finally:
        if mon.poll() is None:
            mon.kill()
            mon.communicate()
    assert mon.returncode == 128 + signal.SIGTERM  # the job died of the forwarded SIGTERM
    assert "recorded to" in err and "Traceback" not in err
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    assert rep["steps"]["count"] >= 50  # whole: the last batch may die with the job
    assert rep["exit_code"] == 143
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
    """20 MB of output (at up to 5 MB/s) through an 8 MB TMPDIR: every line arrives, the
    job exits 0 (it died of its own print's ENOSPC when the files kept everything)."""
    with small_tmpfs(tmp_path / "t", "8m") as tmpdir:
        out = tmp_path / "relayed.txt"
        code = "import time\nfor i in range(200):\n    print(('x' * 99 + '\\n') * 999 + 'x' * 99)\n    time.sleep(0.02)"
        with out.open("w") as f:
            mon = _under_perftop(tmpdir, code, stderr=f)
            assert mon.wait(timeout=300) == 0
        lines = out.read_text().splitlines()
        assert lines.count("x" * 99) == 200000
        assert not list(tmpdir.glob("perftop-out-*"))  # removed at the end


def test_a_disk_filled_by_someone_else_does_not_fail_the_jobs_writes(tmp_path):
    """Another program fills TMPDIR to the last byte while the job runs: the job's next
    400 kB of output still land in space perftop reserved ahead, and every line arrives."""
    go = tmp_path / "go"
    code = (
        "import os, time\n"
        "print('first', flush=True)\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    time.sleep(0.01)\n"
        "for i in range(4000):\n"
        "    print('z' * 99)\n"
    )
    with small_tmpfs(tmp_path / "t", "4m") as tmpdir:
        mon = _under_perftop(tmpdir, code, stderr=subprocess.PIPE)
        assert mon.stderr is not None
        while mon.stderr.readline().strip() != "first":
            pass
        fd = os.open(tmpdir / "filler", os.O_WRONLY | os.O_CREAT)
        for block in (1 << 16, 4096, 1):  # to the last byte
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * block):
                    pass
        os.close(fd)
        go.touch()
        err = mon.communicate(timeout=120)[1]
        assert mon.returncode == 0, err[-2000:]
        assert err.splitlines().count("z" * 99) == 4000


def test_a_killed_monitor_never_fills_the_disk_under_the_job(tmp_path):
    """kill -9 of the monitor: the job writes 24 MB more into a 16 MB TMPDIR and finishes;
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
    with small_tmpfs(tmp_path / "t", "16m") as tmpdir:
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


# -- the bootstrap in every Python child (item 8) ---------------------------------------

PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"
OLD_PYTHONS = [  # where the machine has them (pyenv)
    p
    for p in sorted(PYENV.glob("[23].*/bin/python"))
    if tuple(int(x) for x in p.parts[-3].split(".")[:2]) < (3, 10)
]


def _child_env(tmp_path: Path, sock: Path) -> dict[str, str]:
    """What `perftop run` gives its job, over a user's own sitecustomize."""
    user = tmp_path / "user_site"
    user.mkdir(exist_ok=True)
    (user / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    return hook_env(sock, {"PATH": os.environ["PATH"], "PYTHONPATH": str(user)})


def test_a_child_that_never_imports_torch_pays_almost_nothing(tmp_path):
    """With a live monitor's socket, a `python -c` child loads nothing of perftop's but
    the import watch (no perftop package, no typing, no threading), and the bootstrap
    takes under 5 ms (best of 10, from -X importtime); the user's sitecustomize still runs."""
    sock = listening(tmp_path / "m.sock")
    try:
        env = _child_env(tmp_path, tmp_path / "m.sock")
        code = "import os, sys; print(os.environ.get('CHAINED'), *sorted(sys.modules))"
        plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env={**env, "PYTHONPATH": str(tmp_path / "user_site")})  # fmt: skip
        under = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                               text=True)  # fmt: skip
        assert under.returncode == 0 and under.stderr == ""
        chained, *mods = under.stdout.split()
        assert chained == "yes"
        assert set(mods) - set(plain.stdout.split()[1:]) <= {"_perftop_importwatch"}
        best = math.inf
        for _ in range(10):
            r = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], env=env,
                               capture_output=True, text=True)  # fmt: skip
            us = [int(ln.split("|")[1]) for ln in r.stderr.splitlines()
                  if ln.split("|")[-1].strip() == "sitecustomize"]  # fmt: skip
            best = min(best, us[0] / 1e3)
        assert best < 5.0, f"the bootstrap took {best:.1f} ms at best"
    finally:
        sock.close()


@pytest.mark.parametrize("python", OLD_PYTHONS, ids=lambda p: p.parts[-3])
def test_old_interpreters_stay_silent(tmp_path, python):
    """Python 2.7 and 3 before 3.10, in a job under perftop: not a word from the bootstrap
    (2.7 used to print "'import sitecustomize' failed"), and the user's own still runs."""
    env = _child_env(tmp_path, tmp_path / "m.sock")
    r = subprocess.run([str(python), "-c", "import os; print(os.environ.get('CHAINED'))"],
                       env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (r.returncode, r.stdout.strip(), r.stderr) == (0, "yes", "")


# -- a wrapper killed under its training (item 6) ----------------------------------------

TRAIN = """
import os, sys, torch
m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)
n = 0
while not os.path.exists("stop") or n < 40:
    opt.zero_grad(); m(torch.randn(8, 4)).sum().backward(); opt.step()
    n += 1
    if n == 20:
        print("ready", os.getpid(), flush=True)
print("STEPS", n, flush=True)
sys.exit(3)
"""


def _headless(cwd: Path, rec: Path, *command: str) -> subprocess.Popen[str]:
    """`perftop run --headless --record REC -- COMMAND` in ``cwd``, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "perftop", "run", "--headless", "--record", str(rec), "--",
         *command],
        cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_killed_wrapper_leaves_the_session_following_the_training(tmp_path):
    """`perftop run -- sh -c "python train.py; ..."` and a kill -9 of the shell: the
    training goes on, and so does the session, to the training's own exit code (3), with
    one line saying what happened; the recording has every step."""
    (tmp_path / "train.py").write_text(TRAIN)
    rec = tmp_path / "r.perftop"
    mon = _headless(tmp_path, rec, "sh", "-c", f"{sys.executable} train.py; echo after")
    assert mon.stdout is not None
    word, pid = mon.stdout.readline().split()
    assert word == "ready"
    shell = psutil.Process(int(pid)).parent()
    assert shell is not None and shell.name() == "sh"
    shell.kill()
    shell.wait(timeout=30)
    (tmp_path / "stop").touch()
    out, err = mon.communicate(timeout=120)
    assert mon.returncode == 3, err
    steps = int(out.split()[-1])
    lines = [ln for ln in err.splitlines() if "killed by SIGKILL" in ln]
    assert len(lines) == 1 and f"training (pid {pid}) went on" in lines[0]
    assert "exited with code 3" in lines[0]
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    assert rep["exit_code"] == 3
    assert {r["pid"]: r["steps"] for r in rep["ranks"]} == {int(pid): steps}


def test_a_process_the_wrapper_left_running_unheard_is_named_not_followed(tmp_path):
    """`perftop run -- sh -c "sleep 60 & ..."`: the shell ends at once and leaves a process
    the hook never heard from (a trainer sent to the background before its first step, or
    a daemon). The session ends with the shell's code and names it, once, in the summary
    and in the recording's notes: a run that saw no steps says why."""
    rec = tmp_path / "r.perftop"
    mon = _headless(tmp_path, rec, "sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!")
    out, err = mon.communicate(timeout=60)
    pid = int(out.split()[0])
    try:
        assert mon.returncode == 0, err
        (line,) = [ln for ln in err.splitlines() if "does not follow" in ln]
        assert "(sh, pid" in line and "exited with code 0" in line, line
        assert "left 1 process running" in line and f"pid {pid} (sleep 60)" in line, line
        rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
        assert [n for n in rep["notes"] if f"pid {pid} (sleep 60)" in n["text"]], rep["notes"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # a wrapper whose children are done before it ends leaves nothing to name
    mon = _headless(tmp_path, tmp_path / "r2.perftop", "sh", "-c", "sleep 0.1 & wait")
    out, err = mon.communicate(timeout=60)
    assert mon.returncode == 0 and "does not follow" not in err, err
    # nor one whose last process ends by itself just after it (multiprocessing's resource
    # tracker, which exits once the processes that used it have)
    mon = _headless(tmp_path, tmp_path / "r3.perftop", "sh", "-c", "sleep 0.4 >/dev/null 2>&1 &")
    out, err = mon.communicate(timeout=60)
    assert mon.returncode == 0 and "does not follow" not in err, err


LOADER_TRAIN = """
import os, sys
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(4096, 8), torch.randn(4096, 1))
n = 0
while True:
    for x, y in DataLoader(data, batch_size=16, num_workers=2):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        n += 1
        if n == 30:
            print("ready", os.getpid(), flush=True)
"""


def test_a_killed_training_ends_the_session_with_its_signal(tmp_path):
    """kill -9 of the job's top process when it is the training itself: its DataLoader
    workers live on for a few seconds (until they see their parent gone) and exit 0. They
    are not training that went on: the session ends with the kill's code (137), not theirs."""
    (tmp_path / "train.py").write_text(LOADER_TRAIN)
    rec = tmp_path / "r.perftop"
    mon = _headless(tmp_path, rec, sys.executable, "train.py")
    assert mon.stdout is not None
    word, pid = mon.stdout.readline().split()
    assert word == "ready"
    workers = psutil.Process(int(pid)).children()
    assert len(workers) == 2
    time.sleep(1.0)  # the workers' hellos are in (each sends its figures every 0.25 s)
    os.kill(int(pid), signal.SIGKILL)
    out, err = mon.communicate(timeout=120)
    assert mon.returncode == 137, err
    assert "went on" not in err and "killed (SIGKILL)" in err, err
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    assert rep["exit_code"] == 137 and rep["exit_signal"] == "SIGKILL"
