"""`perftop ls` and `perftop attach`: sessions stay reachable, viewers are read-only and
start with the history, plain processes are observed from outside with py-spy."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from perftop.events import Note
from perftop.monitor import inject, stacks
from perftop.monitor.hub import Hub
from perftop.monitor.registry import sessions
from perftop.monitor.server import VIEW_MAGIC, Server
from perftop.monitor.sockpath import socket_dir
from perftop.wire import MAGIC, decode_frame, encode_frame, event_count
from perftop.wire_stream import FrameReader
from tests.helpers import (
    WORKLOADS,
    injected_job,
    perftop,
    send_as_nobody,
    spawn_slow_job,
    until_step,
)


def _wait(cond, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end and not cond():
        time.sleep(0.05)
    return cond()


def test_ls_lists_a_headless_session_and_attach_gets_its_history(tmp_path):
    """`perftop ls` has the monitor take a snapshot when asked: with snapshots 5 s apart
    (``--refresh 5``) the last one read 0 steps of a job 100 steps in."""
    mon = spawn_slow_job(tmp_path, "--no-record", "--refresh", "5")
    try:
        until_step(mon, 100)

        def listed() -> dict:
            ls = perftop("ls", "--json", cwd=tmp_path, timeout=60)
            assert ls.returncode == 0, ls.stderr
            mine = [s for s in json.loads(ls.stdout)["sessions"] if s["monitor_pid"] == mon.pid]
            assert len(mine) == 1
            return mine[0]

        # ls answers from a snapshot taken when asked (not the last one, up to 5 s old), of
        # the steps the hook has sent (it holds them up to 0.25 s)
        time.sleep(0.5)
        s = listed()
        assert s["command"][-1].endswith("slow_steps.py") and s["steps"] >= 100, s
        assert s["job_pid"] in s["pids"] and os.path.exists(s["socket"])
        text = perftop("ls", cwd=tmp_path, timeout=60).stdout
        assert s["socket"] in text and str(s["job_pid"]) in text
        rec = tmp_path / "viewer.perftop"
        att = perftop("attach", str(s["job_pid"]), "--headless", "--duration", "1.5",
                      "--record", str(rec), cwd=tmp_path, timeout=60)  # fmt: skip
        assert att.returncode == 0, att.stderr
        assert mon.poll() is None  # the job and its monitor go on undisturbed
        rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
        assert rep["command"][-1].endswith("slow_steps.py")
        # The viewer came 100 steps in and stayed 1.5 s: it has the steps from before it came.
        assert rep["steps"]["count"] > s["steps"]
        assert rep["processes"][0]["role"] == "main"
        # No TARGET: the one session running, or (other tests' beside it) one line naming
        # the jobs, this one among them
        rec2 = tmp_path / "only.perftop"
        att = perftop("attach", "--headless", "--duration", "1", "--record", str(rec2),
                      cwd=tmp_path, timeout=60)  # fmt: skip
        if att.returncode == 0:
            only = json.loads(perftop("report", "--json", str(rec2), cwd=tmp_path).stdout)
            assert only["steps"]["pid"] == s["job_pid"], only["steps"]
        else:
            assert att.returncode == 2 and att.stderr.count("\n") == 1, att.stderr
            assert "perftop sessions are running" in att.stderr, att.stderr
            assert str(s["job_pid"]) in att.stderr, att.stderr
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=30)
    ls = json.loads(perftop("ls", "--json", cwd=tmp_path, timeout=60).stdout)
    assert all(x["monitor_pid"] != mon.pid for x in ls["sessions"])


def test_dead_sockets_are_removed_never_listed():
    path = socket_dir() / "999999-deadbeef.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # bound, never listening: what a killed monitor leaves behind
    assert path.exists()
    assert all(x["socket"] != str(path) for x in sessions())
    assert not path.exists()


def test_a_viewer_gets_the_stream_and_cannot_send_anything(tmp_path):
    hub = Hub().start()
    srv = Server(hub.submit_frame, tmp_path / "s.sock", on_viewer=lambda c: hub.subscribe(_sink(c))).start()  # fmt: skip
    try:
        hub.submit(Note(1.0, "info", "job", "before the viewer"))
        v = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        v.connect(str(srv.path))
        v.sendall(VIEW_MAGIC)
        # Anything a viewer sends is never read: not even well-formed events.
        v.sendall(MAGIC + encode_frame([Note(2.0, "info", "viewer", "stop the job")]))
        hub.submit(Note(3.0, "info", "job", "after"))
        got: list = []
        reader = FrameReader()
        v.settimeout(5)
        while not any(getattr(e, "text", "") == "after" for e in got):
            for f in reader.feed(v.recv(65536)):
                got += decode_frame(f)[0]
        assert [e.text for e in got if isinstance(e, Note)] == ["before the viewer", "after"]
        time.sleep(0.3)
        assert all(n.source != "viewer" for n in hub.session.snapshot().notes)
        assert srv.viewers == 1
    finally:
        srv.close()
        hub.stop()


def _sink(conn):
    from perftop.monitor.sinks import SocketSink

    return SocketSink(conn)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_another_user_is_refused(tmp_path):
    got: list = []
    d = Path(tempfile.mkdtemp(prefix="perftop-peer-"))  # pytest's own tmp is 0700
    os.chmod(d, 0o755)
    srv = Server(lambda f, e: got.extend(e), d / "s.sock").start()
    try:
        os.chmod(srv.path, 0o666)  # as if the directory and socket modes had been loosened
        send_as_nobody(srv.path, MAGIC + encode_frame([Note(1.0, "i", "x", "y")]))
        assert _wait(lambda: srv.refused_peers == 1, 5)
        assert got == []
    finally:
        srv.close()
        d.rmdir()


def test_attach_to_nothing_is_one_clear_line(tmp_path):
    out = perftop("attach", "999999", "--headless", cwd=tmp_path)
    assert (
        out.returncode == 4 and out.stderr.strip() == "perftop: error: no process with pid 999999"
    )
    out = perftop("attach", "nosuch", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr


def test_attach_with_no_target_names_none_or_several_in_one_line(monkeypatch, capsys) -> None:
    """``perftop attach`` alone watches the one session running (a real one: the test
    above); with none or several it says how to name one, in one line."""
    from perftop.cli import main
    from perftop.monitor import registry

    assert registry.only_session([]) is None
    assert registry.only_session([{"socket": "/s/1.sock"}]) == "/s/1.sock"
    assert registry.only_session([{"socket": "/s/1.sock"}, {"socket": "/s/2.sock"}]) is None
    monkeypatch.setattr(registry, "sessions", lambda: [])
    assert main(["attach", "--headless"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no perftop session is running" in err, err
    two = [{"socket": "/s/1.sock", "job_pid": 41}, {"socket": "/s/2.sock", "job_pid": "\x1b]0"}]
    monkeypatch.setattr(registry, "sessions", lambda: two)
    assert main(["attach", "--headless"]) == 2
    err = capsys.readouterr().err
    assert "2 perftop sessions are running (jobs 41, ?)" in err and "\x1b" not in err, err
    assert main(["attach", "--ssh", "node7"]) == 2
    assert "perftop ls --ssh node7" in capsys.readouterr().err


def test_injection_offer_follows_the_python_version(tmp_path):
    """Tested with the Pythons here (3.11): the offer needs 3.14+ (sys.remote_exec)."""
    assert inject.python_version(os.getpid()) == sys.version_info[:2]
    ok, why = inject.can_inject((3, 11))
    assert not ok and "3.14" in why and "3.11" in why
    ok, why = inject.can_inject((3, 14))
    assert ok and "--inject" in why
    assert inject.can_inject((3, 15))[0] and not inject.can_inject(None)[0]


STEPS = ("Step", "StepBatch")  # a live reader hands a frame of packed steps whole


def test_the_injected_script_installs_a_working_hook(tmp_path):
    """What sys.remote_exec would run, run by hand in a plain process: the hook connects
    to a real monitor socket and introduces itself."""
    with injected_job(tmp_path, "for _ in range(20): step()\n") as (_, got):
        assert _wait(lambda: event_count([e for e in got if type(e).__name__ in STEPS]) >= 10, 5)
        assert any(type(e).__name__ == "Hello" for e in got)


def test_only_processes_of_the_job_are_dumped():
    assert stacks.in_job(os.getpid(), os.getpid())
    assert not stacks.in_job(os.getpid(), 1)


def test_permission_advice_names_the_cause(monkeypatch):
    """The causes a user can meet, each faked at its one boundary (who we are, the
    capability, the Yama setting); the real refusal is tested above."""
    victim = subprocess.Popen(["sleep", "30"], user=65534) if os.getuid() == 0 else None
    try:
        pid = victim.pid if victim is not None else 1
        monkeypatch.setattr(stacks.os, "geteuid", lambda: 1000)
        assert "another user" in stacks.permission_advice(pid)
        monkeypatch.setattr(stacks.os, "geteuid", lambda: 0)
        monkeypatch.setattr(stacks, "_has_cap_ptrace", lambda: False)
        assert "SYS_PTRACE" in stacks.permission_advice(pid)
        monkeypatch.setattr(stacks, "_has_cap_ptrace", lambda: True)
        monkeypatch.setattr(stacks, "_ptrace_scope", lambda: 1)
        assert "ptrace_scope is 1" in stacks.permission_advice(pid)
        monkeypatch.setattr(stacks, "_ptrace_scope", lambda: 0)
        assert "sudo" not in stacks.permission_advice(pid)  # root already
    finally:
        if victim is not None:
            victim.kill()
            victim.wait()


# A training as a wrapper's tree shows it (torch loaded, no perftop), idle: a job with
# busy DataLoader workers took two cores' worth from the suite for nothing asserted here.
IDLE = f"{sys.executable} -c 'import time, torch; print(\"ready\", flush=True); time.sleep(60)'"


def test_attach_to_a_shell_or_to_perftop_itself_is_one_line(capsys) -> None:
    """A shell's tree holds the training (and may hold this perftop, which it would end
    up sampling): named in one line instead of observed; so is perftop's own pid."""
    from perftop.cli import main

    env = {k: v for k, v in os.environ.items() if k != "PERFTOP_SOCKET"}
    shell = subprocess.Popen(["bash", "-c", f"{IDLE}; :"], stdout=subprocess.PIPE, env=env)
    try:
        assert shell.stdout is not None and shell.stdout.readline().strip() == b"ready"
        trainer = next(iter(psutil.Process(shell.pid).children()))
        for target, said in (
            (shell.pid, f"pid {shell.pid} (bash) is not a Python process"),
            (shell.pid, f"its training is pid {trainer.pid}"),
            (os.getpid(), "runs this perftop"),
        ):
            assert main(["attach", str(target), "--headless"]) == 4
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and said in err, err
    finally:
        for p in psutil.Process(shell.pid).children(recursive=True):
            p.kill()
        shell.kill()
        shell.wait(10)


def test_attach_to_an_ancestor_never_names_a_training_of_another_session(capsys) -> None:
    """Init, or any process a training merely descends from (started in a session of its
    own: another terminal, a daemon), is not that training's wrapper: not named as such."""
    from perftop.cli import main

    env = {k: v for k, v in os.environ.items() if k != "PERFTOP_SOCKET"}
    shell = subprocess.Popen(["bash", "-c", f"setsid {IDLE}; :"], stdout=subprocess.PIPE, env=env)
    try:
        assert shell.stdout is not None and shell.stdout.readline().strip() == b"ready"
        assert main(["attach", str(shell.pid), "--headless"]) == 4
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is not a Python process" in err, err
        assert "training" not in err, err
    finally:
        for p in psutil.Process(shell.pid).children(recursive=True):
            p.kill()
        shell.kill()
        shell.wait(10)


@pytest.fixture(scope="module")
def plain_training():
    """`python plain_loader.py` started without perftop: 2 workers busy in `dilate`.
    Started once for the module: its tests only observe it from outside. They come last
    in this module, since its busy workers would slow every test that ran beside them."""
    env = {k: v for k, v in os.environ.items() if k != "PERFTOP_SOCKET"}
    proc = subprocess.Popen(
        [sys.executable, str(WORKLOADS / "plain_loader.py"), "120"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait(10)


def _workers_up(proc: subprocess.Popen[str], n: int = 2) -> bool:
    return _wait(lambda: len(psutil.Process(proc.pid).children()) >= n, 20)


def test_observer_mode_shows_the_workers_and_where_they_spend_time(tmp_path, plain_training):
    assert _workers_up(plain_training)
    ls = json.loads(perftop("ls", "--json", cwd=tmp_path, timeout=60).stdout)
    cand = [c for c in ls["candidates"] if c["pid"] == plain_training.pid]
    assert cand and cand[0]["children"] == 2, ls  # its workers are counted, not listed
    rec = tmp_path / "obs.perftop"
    att = perftop("attach", str(plain_training.pid), "--headless", "--duration", "6",
                  "--record", str(rec), cwd=tmp_path, timeout=90)  # fmt: skip
    assert att.returncode == 0 and "Traceback" not in att.stderr, att.stderr
    assert "observer mode" in att.stderr and "dilate" in att.stderr
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    assert rep["observer"] is True
    roles = {p["pid"]: p["role"] for p in rep["stacks"]}
    assert roles[plain_training.pid] == "main"
    workers = [p for p in rep["stacks"] if p["role"] == "worker"]
    assert len(workers) == 2
    for w in workers:
        assert w["top_frames"][0]["function"] == "dilate"
        assert w["top_frames"][0]["file"].endswith("plain_loader.py")
        assert 0 < w["top_frames"][0]["share"] <= 1
    main = next(p for p in rep["stacks"] if p["role"] == "main")
    # Mostly waiting on the workers' queue; a few samples land on unpacking a batch.
    assert "DataLoader" in main["where"][0]["what"]
    assert {p["role"] for p in rep["processes"]} == {"main", "worker"}
    assert len(rep["processes"]) == 3


def test_stacks_refused_without_ptrace_capability_is_explained(tmp_path, plain_training):
    """A root without CAP_SYS_PTRACE (a container without SYS_PTRACE) cannot read a
    full-capability process: one clear line, no traceback."""
    if subprocess.run(["setpriv", "--help"], capture_output=True).returncode != 0:
        pytest.skip("setpriv (util-linux) is needed to drop a capability")
    if os.getuid() != 0:
        pytest.skip("the container case is root without SYS_PTRACE")
    out = subprocess.run(
        ["setpriv", "--bounding-set=-sys_ptrace", sys.executable, "-m", "perftop", "attach",
         str(plain_training.pid), "--headless", "--duration", "1"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert "SYS_PTRACE" in out.stderr and f"pid {plain_training.pid}" in out.stderr


def test_attaching_to_a_worker_observes_its_training(tmp_path, plain_training):
    from perftop.monitor.registry import job_top

    assert _workers_up(plain_training)
    worker = psutil.Process(plain_training.pid).children()[0].pid
    assert job_top(worker) == plain_training.pid
    assert job_top(plain_training.pid) == plain_training.pid
    assert job_top(os.getpid()) == os.getpid()  # not a worker of its parent
