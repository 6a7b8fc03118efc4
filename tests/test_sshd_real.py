"""`ls`, `attach` and `collect` through a real OpenSSH server on loopback: OpenSSH's sshd
on a free high port with key authentication, a temporary host key and authorized_keys,
and the system ssh client. The "remote" is this machine: the remote shell starts this
checkout's perftop (``PERFTOP_REMOTE``). ``.ci/run`` installs openssh-server; without it
these tests are skipped, which CI counts as a failure."""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import WORKLOADS, default_sigint, perftop, spawn_slow_job
from tests.test_ssh_drain import _job, _wait_file

SSHD = "/usr/sbin/sshd"
pytestmark = pytest.mark.skipif(
    not (os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-keygen")),
    reason="OpenSSH's server or client is not installed (.ci/run installs openssh-server)",
)
HOST = f"{getpass.getuser()}@127.0.0.1"
NODE = "127.0.0.1"
ROOT = WORKLOADS.parent.parent  # this checkout: the remote perftop is its perftop


class Sshd:
    """sshd on loopback, in the foreground (``-D -e``), with its own config and keys."""

    def __init__(self, d: Path) -> None:
        self.dir = d
        for name in ("host_key", "id"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "perftop-test",
                            "-f", str(d / name)], check=True)  # fmt: skip
        (d / "authorized_keys").write_text((d / "id.pub").read_text())
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        host_pub = " ".join((d / "host_key.pub").read_text().split()[:2])
        (d / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_pub}\n")
        (d / "unknown_hosts").write_text("")
        (d / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile {d / 'sshd.pid'}\n"
            "PubkeyAuthentication yes\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            "PermitRootLogin prohibit-password\nLogLevel ERROR\n"
        )
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation
        self.log = open(d / "sshd.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                                     stdout=self.log, stderr=self.log)  # fmt: skip
        deadline = time.monotonic() + 15
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1) as c,
            ):
                if c.recv(4) == b"SSH-":
                    break
            assert self.proc.poll() is None, (d / "sshd.log").read_text()
            assert time.monotonic() < deadline, "sshd did not start"
            time.sleep(0.05)

    def env(self, known: str = "known_hosts") -> dict[str, str]:
        """The environment of a local perftop using this server: its ssh, and the remote
        perftop (this checkout's, by this interpreter)."""
        ssh = (
            f"ssh -F /dev/null -p {self.port} -i {self.dir / 'id'} -o IdentitiesOnly=yes "
            f"-o UserKnownHostsFile={self.dir / known} -o StrictHostKeyChecking=ask "
            "-o LogLevel=ERROR"
        )
        remote = f"env PYTHONPATH={shlex.quote(str(ROOT))} {shlex.quote(sys.executable)} -m perftop"
        return {**os.environ, "PERFTOP_SSH": ssh, "PERFTOP_REMOTE": remote}

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen[str]]:
    """One headless `perftop run` of a slow training, watched from "another machine"."""
    mon = spawn_slow_job(tmp_path_factory.mktemp("job"), "--no-record")
    try:
        yield mon
    finally:
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=30)


def _perftop(
    sshd: Sshd, cwd: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perftop", *args], cwd=cwd, env=sshd.env(),
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)  # fmt: skip


def test_ls_and_attach(sshd: Sshd, job: subprocess.Popen[str], tmp_path: Path) -> None:
    ls = _perftop(sshd, tmp_path, "ls", "--ssh", HOST, "--json")
    assert ls.returncode == 0, ls.stderr
    mine = [s for s in json.loads(ls.stdout)["sessions"] if s["monitor_pid"] == job.pid]
    assert len(mine) == 1
    pid = mine[0]["job_pid"]
    rec = tmp_path / "seen.perftop"
    att = _perftop(sshd, tmp_path, "attach", "--ssh", HOST, str(pid), "--headless",
                   "--duration", "4", "--record", str(rec))  # fmt: skip
    assert att.returncode == 0, att.stderr
    assert "exited with" not in att.stderr and "link ended" not in att.stderr, att.stderr
    rep = json.loads(perftop("report", "--json", str(rec), cwd=tmp_path).stdout)
    assert [(r["host"], r["pid"]) for r in rep["ranks"]] == [(NODE, pid)]
    assert rep["ranks"][0]["steps"] > 10
    assert job.poll() is None  # the job goes on undisturbed


JOB = """
import os, sys
print("hello from", os.getcwd(), flush=True)
open("was-here", "w").close()
sys.exit(2)
"""


def test_collect_in_a_remote_directory_returns_the_jobs_code(sshd: Sshd, tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    home = Path.home()
    before = set(home.glob("*.perftop"))
    p = _perftop(sshd, tmp_path.parent, "collect", "--headless", "--no-record", "--ssh", HOST,
                 "--remote-dir", str(tmp_path), "--", "python3", "job.py")  # fmt: skip
    assert p.returncode == 2, p.stderr  # the remote job's own exit code
    assert f"[{NODE}] hello from {tmp_path}" in p.stderr
    assert (tmp_path / "was-here").exists()
    assert set(home.glob("*.perftop")) == before  # no recording left in the remote $HOME
    assert not list(tmp_path.glob("*.perftop"))
    assert "exited with" not in p.stderr and "link ended" not in p.stderr, p.stderr
    assert f"{NODE}: exited (2)" in p.stderr


def test_collect_ended_early_the_remote_job_goes_on(sshd: Sshd, tmp_path: Path) -> None:
    # 6 s of printing: a loaded CI host took ~1.8 s from the Ctrl-C to closing ssh, longer
    # than the 1.7 s a 2 s job had left (the job's own end, code 3, came first).
    cmd, started, rc = _job(tmp_path, lines=60)
    p = subprocess.Popen([sys.executable, "-m", "perftop", "collect", "--headless", "--no-record",
                          "--ssh", HOST, "--", *cmd], cwd=tmp_path, env=sshd.env(), text=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=default_sigint)  # fmt: skip
    try:
        _wait_file(started)
        time.sleep(0.3)  # the job is printing, through ssh
        p.send_signal(signal.SIGINT)  # the local side ends (Ctrl-C), the job has 5.7 s to go
        _, err = p.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            p.kill()
    assert p.returncode == 0, err  # the job still runs: no exit code to give yet
    assert "exited with" not in err and "Traceback" not in err, err
    assert f"[{NODE}] line 0" in err
    assert _wait_file(rc) == "3"  # it printed on, and ended with its own code


class Pty:
    """A command on a pseudo-terminal of its own (its controlling terminal: ssh asks there)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

        def own_terminal() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                                     env={**env, "TERM": "xterm-256color"},
                                     preexec_fn=own_terminal)  # fmt: skip
        os.close(slave)
        self.seen = b""

    def wait_for(self, pattern: bytes, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.seen):
            left = deadline - time.monotonic()
            assert left > 0, f"{pattern!r} never came; the terminal showed:\n{self.seen[-3000:]!r}"
            if select.select([self.master], [], [], min(left, 0.2))[0]:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:  # the command ended and closed the terminal
                    assert re.search(pattern, self.seen), self.seen[-3000:]
                    return

    def wait(self, timeout: float) -> int:
        """Its exit code, reading what it shows meanwhile (a full terminal would block it)."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, f"still running; it showed:\n{self.seen[-3000:]!r}"
            if select.select([self.master], [], [], 0.1)[0]:
                with contextlib.suppress(OSError):
                    self.seen += os.read(self.master, 65536)
        with contextlib.suppress(OSError):
            while select.select([self.master], [], [], 0.05)[0]:
                self.seen += os.read(self.master, 65536)
        return self.proc.returncode

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self.master)


def test_an_ssh_question_is_asked_before_the_tui(
    sshd: Sshd, job: subprocess.Popen[str], tmp_path: Path
) -> None:
    """An unknown host key: ssh's question shows in the terminal, not behind the TUI; "no"
    ends perftop at once with one line, "yes" brings the TUI up with the session."""
    argv = [sys.executable, "-m", "perftop", "attach", "--ssh", HOST, str(job.pid)]
    ask = rb"continue connecting \(yes/no"
    tui_on = b"\x1b[?1049h"  # the TUI takes the screen
    for answer in ("no", "yes"):
        term = Pty(argv, sshd.env("unknown_hosts"), tmp_path)
        try:
            term.wait_for(ask)
            assert tui_on not in term.seen  # asked in the terminal, not behind a TUI
            term.send(answer + "\r")
            if answer == "no":
                assert term.wait(timeout=30) == 4
                term.wait_for(rb"host key of 127\.0\.0\.1 is not known", timeout=5)
                assert b"Traceback" not in term.seen
            else:
                term.wait_for(re.escape(tui_on))
                term.wait_for(rb"[1-9] procs", timeout=60)  # the remote session shows
                term.send("q")
                assert term.wait(timeout=30) == 0
        finally:
            term.close()
            (sshd.dir / "unknown_hosts").write_text("")  # "yes" wrote the key: forget it


def test_ci_installs_openssh_server() -> None:
    line = re.search(r"apt-get install -y -qq ([^>\n]*)", (ROOT / ".ci" / "run").read_text())
    assert line is not None and "openssh-server" in line.group(1).split()
