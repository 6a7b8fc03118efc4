"""Another user on the machine cannot get into a session (issue 43, items 5 and 7).

The neighbour is uid 65534 ("nobody", on every Debian), run with the system's own Python:
perftop's virtual environment under /root is not theirs to read. They plant names in the
shared temporary directory before the victim (root here, as in CI) runs perftop."""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from perftop.events import CaptureAsk
from perftop.hook.trace_file import trace_path, write_trace
from perftop.monitor.jobenv import hook_env
from perftop.monitor.sockdir import private_dir, private_dirs
from perftop.peer import OtherUser, check_same_user, same_user
from perftop.wire import encode_frame
from tests.helpers import perftop

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A shared directory like /tmp (sticky, anyone may create), that nobody can reach."""
    d = Path(tempfile.mkdtemp(prefix="perftop-shared-", dir="/tmp"))
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@functools.cache
def their_python() -> str:
    """A Python the neighbour can run: the system's (perftop's venv under /root is not)."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3", str(base)):
        try:
            r = subprocess.run([cand, "-c", "pass"], user=NOBODY, group=NOBODY,
                               capture_output=True, check=False)  # fmt: skip
        except OSError:  # not there
            continue
        if r.returncode == 0:
            return cand
    pytest.fail("no Python that uid 65534 can run")


def as_nobody(code: str, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([their_python(), "-c", code, *args], user=NOBODY, group=NOBODY,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)  # fmt: skip


def plant_dir(path: Path, mode: int = 0o777) -> None:
    """``path`` made by the neighbour: theirs, open to all."""
    p = as_nobody(f"import os; os.mkdir({str(path)!r}); os.chmod({str(path)!r}, {mode})")
    assert p.wait(timeout=20) == 0, p.stderr.read() if p.stderr else ""


def test_a_neighbours_directory_is_left_alone_and_a_fresh_one_used(shared: Path) -> None:
    uid = os.geteuid()
    theirs = shared / f"perftop-{uid}"
    plant_dir(theirs)
    d = private_dir(shared)
    assert d != theirs and d.name.startswith(f"perftop-{uid}-")
    st = d.lstat()
    assert st.st_uid == uid and st.st_mode & 0o777 == 0o700
    st = theirs.lstat()  # neither chmod-ed nor chown-ed (they kept a door open before)
    assert st.st_uid == NOBODY and st.st_mode & 0o777 == 0o777
    assert private_dir(shared) == d  # the same one next time: `ls` finds the sessions
    assert private_dirs(shared) == [d]


def test_a_planted_link_or_file_is_never_followed(shared: Path) -> None:
    uid = os.geteuid()
    target = shared / "elsewhere"
    target.mkdir(mode=0o700)  # even a directory of ours: a link to it is not the name
    (shared / f"perftop-{uid}").symlink_to(target)
    d = private_dir(shared)
    assert d.parent == shared and not d.is_symlink() and d != target
    (shared / f"perftop-{uid}").unlink()
    (shared / f"perftop-{uid}").write_text("")
    assert private_dir(shared) == d


def test_our_own_directory_is_used_and_closed(shared: Path) -> None:
    mine = shared / f"perftop-{os.geteuid()}"
    mine.mkdir(mode=0o755)
    os.chmod(mine, 0o755)
    assert private_dir(shared) == mine and mine.stat().st_mode & 0o777 == 0o700


def test_run_and_ls_work_beside_a_planted_socket_directory(shared: Path) -> None:
    """Item 7: a file where the directory goes stopped every run with a traceback; a
    neighbour's directory took the session's socket (item 5)."""
    uid = os.geteuid()
    (shared / f"perftop-{uid}").write_text("")  # as a neighbour leaves it
    env = {**os.environ, "TMPDIR": str(shared)}
    env.pop("XDG_RUNTIME_DIR", None)
    job = "import time; print('ready', flush=True); time.sleep(30)"
    mon = subprocess.Popen(
        [sys.executable, "-m", "perftop", "run", "--headless", "--no-record", "--",
         sys.executable, "-c", job],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    try:
        assert mon.stdout is not None and mon.stdout.readline().strip() == "ready"
        ls = subprocess.run([sys.executable, "-m", "perftop", "ls", "--json"], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
        assert ls.returncode == 0 and "Traceback" not in ls.stderr, ls.stderr
        import json

        # `ls` also lists this user's sessions in the other bases (/tmp, ...): this one's
        (s,) = [s for s in json.loads(ls.stdout)["sessions"]
                if Path(s["socket"]).parent.parent == shared]  # fmt: skip
        sock = Path(s["socket"])
        assert sock.parent.name.startswith(f"perftop-{uid}-") and sock.parent.parent == shared
        assert sock.parent.lstat().st_uid == uid
    finally:
        mon.terminate()
        _, err = mon.communicate(timeout=30)
    assert "Traceback" not in err


EVIL_MONITOR = """
import os, socket, sys, time
path, ask, log = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o777)
s.listen(16)
s.settimeout(0.2)
got, conns, end = 0, [], time.monotonic() + float(sys.argv[4])
def note():
    with open(log + ".new", "w") as f:
        f.write(f"{len(conns)} {got}")
    os.replace(log + ".new", log)  # whole, even when killed
note()  # there before anyone is told to look
print("listening", flush=True)
while time.monotonic() < end:
    try:
        c, _ = s.accept()
        c.setblocking(False)
        c.sendall(ask)
        conns.append(c)
    except OSError:
        pass
    for c in conns:
        try:
            got += len(c.recv(65536))
        except OSError:
            pass
    note()
"""

TRAIN = """
import time, torch
m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(30):
    opt.zero_grad(); m(torch.randn(8, 4)).sum().backward(); opt.step(); time.sleep(0.05)
"""


def test_the_hook_sends_nothing_to_and_obeys_nothing_from_another_users_socket(
    shared: Path, tmp_path: Path
) -> None:
    """Item 5: the hooks of root's job connected to a neighbour's socket, sent their
    stream and wrote a trace where the neighbour asked, as root."""
    victim = tmp_path / "home"
    victim.mkdir()
    prefix = str(victim / "capture-abcdef01-")  # a name the hook would take, from a peer
    ask = encode_frame([CaptureAsk(time.time(), "abcdef01", 2, prefix, "x")])
    log = shared / "log.txt"
    sock = shared / "planted.sock"
    evil = as_nobody(EVIL_MONITOR, str(sock), ask.hex(), str(log), "25")
    try:
        assert evil.stdout is not None and evil.stdout.readline().strip() == "listening"
        job = subprocess.run([sys.executable, "-c", TRAIN], env=hook_env(sock), timeout=120,
                             capture_output=True, text=True)  # fmt: skip
        assert job.returncode == 0, job.stderr
    finally:
        evil.kill()
        evil.wait()
    conns, got = map(int, log.read_text().split())
    assert got == 0, (conns, got)  # not one byte: no hello, no stream
    assert list(victim.iterdir()) == []  # no trace where the peer asked


def test_clients_refuse_a_monitor_of_another_user(shared: Path) -> None:
    sock = shared / "planted.sock"
    evil = as_nobody(EVIL_MONITOR, str(sock), "", str(shared / "log"), "20")
    try:
        assert evil.stdout is not None and evil.stdout.readline().strip() == "listening"
        c = socket.socket(socket.AF_UNIX)
        c.connect(str(sock))
        assert not same_user(c)
        with pytest.raises(OtherUser):
            check_same_user(c)
        c.close()
        from perftop.errors import AttachError
        from perftop.monitor.capture import request
        from perftop.monitor.hub import Hub
        from perftop.monitor.registry import query
        from perftop.monitor.viewer import SessionViewer

        assert query(sock) is None
        with pytest.raises(AttachError, match="another user"):
            SessionViewer(sock, Hub())
        from perftop.errors import PerftopError

        with pytest.raises(PerftopError, match="another user"):
            request(str(sock), 2, "t", lambda ev: None, 5.0)
    finally:
        evil.kill()
        evil.wait()
    assert (shared / "log").read_text().split()[1] == "0"  # not even a greeting


def test_a_trace_goes_only_to_a_name_perftop_gives_and_never_through_a_link(
    tmp_path: Path,
) -> None:
    assert trace_path("/home/u/.bashrc", "abcdef01", 7) is None
    assert trace_path("/d/r.perftop.capture-00000000-", "abcdef01", 7) is None  # another's
    path = trace_path(str(tmp_path / "r.perftop.capture-abcdef01-"), "abcdef01", 7)
    assert path == str(tmp_path / "r.perftop.capture-abcdef01-7.trace.json")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    Path(path).symlink_to(victim)
    with pytest.raises(FileExistsError):
        write_trace(lambda p: Path(p).write_text("{}"), path)
    assert victim.read_text() == "precious"
    Path(path).unlink()
    write_trace(lambda p: Path(p).write_text('{"traceEvents": []}'), path)
    assert Path(path).read_text() == '{"traceEvents": []}'
    assert Path(path).stat().st_mode & 0o777 == 0o600


def test_ls_still_lists_sessions_as_before(tmp_path: Path) -> None:
    r = perftop("ls", cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr


PLANT_OUT = """
import os, sys
d = os.path.join(sys.argv[1], "perftop-out-evil")
os.mkdir(d); os.chmod(d, 0o777)
os.symlink(sys.argv[2], os.path.join(d, "stderr.log"))
os.symlink(sys.argv[3], os.path.join(d, "stdout.log"))
os.symlink(sys.argv[4], os.path.join(d, "lock"))
os.utime(d, (0, 0))
"""


def test_ls_cleans_nothing_through_a_planted_link(shared: Path, tmp_path: Path) -> None:
    """Item 6: a link planted in a `perftop-out-*` directory made root's `perftop ls`
    truncate another file (one a live process held open) to 0 bytes."""
    held = tmp_path / "held.txt"  # root's own, open in a live process
    held.write_text("keep me")
    os.chmod(held, 0o600)
    other = tmp_path / "other.txt"
    other.write_text("me too")
    new = tmp_path / "made-by-lock"
    p = as_nobody(PLANT_OUT, str(shared), str(held), str(other), str(new))
    assert p.wait(timeout=20) == 0, p.stderr.read() if p.stderr else ""
    # and a directory of ours (as a killed monitor leaves it) with a link in it
    mine = shared / "perftop-out-mine"
    mine.mkdir(mode=0o700)
    (mine / "lock").touch()
    (mine / "stderr.log").symlink_to(held)
    (mine / "stdout.log").write_bytes(b"z" * 1000)
    os.utime(mine, (0, 0))
    env = {**os.environ, "TMPDIR": str(shared)}
    with held.open("a"):
        r = subprocess.run([sys.executable, "-m", "perftop", "ls"], env=env, text=True,
                           capture_output=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert held.read_text() == "keep me" and other.read_text() == "me too"
    assert not new.exists()  # no lock file made through their link
    assert (shared / "perftop-out-evil" / "stderr.log").is_symlink()  # theirs: untouched
    assert not mine.exists()  # ours: cleaned, the link removed (never followed)
    assert "cleaned 1 job output file(s)" in r.stderr
