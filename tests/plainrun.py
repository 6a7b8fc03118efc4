"""Plain reference runs (a job without perftop, to compare perftop's run with) forked from
a warmed interpreter (tests/zygote.py): the same program, argv, cwd and environment, its
imports already made. Only what a fork can give exactly: ``python SCRIPT ARGS`` or
``python -c CODE ARGS`` with the suite's interpreter, forked from a zygote started in the
same environment (all that is read at start-up); anything else (interpreter flags) runs as
a subprocess.

Not for tests of what a job imports or of how the interpreter starts: a forked job has
torch and torch._dynamo already imported."""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

ZYGOTE = Path(__file__).with_name("zygote.py")
# read when an interpreter or torch starts: a request that differs here runs as a subprocess
AT_START = ("PYTHON", "OMP_", "MKL_", "KMP_", "TORCH", "PYTORCH", "LD_", "CUDA", "MALLOC")
# ... but for these, which the zygote's child applies as the interpreter would
APPLIED = frozenset({"PYTHONWARNINGS", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"})


class _Zygote:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.proc = subprocess.Popen(
            [sys.executable, str(ZYGOTE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={k: v for k, v in self.env.items() if k != "PYTHONWARNINGS"},  # the child's own
            start_new_session=True,
        )  # fmt: skip
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.ctl_in: IO[bytes] = self.proc.stdin
        self.ctl_out: IO[bytes] = self.proc.stdout

    def fits(self, env: Mapping[str, str]) -> bool:
        keys = set(env) ^ set(self.env) | {k for k in env if env[k] != self.env.get(k)}
        return not any(k.startswith(AT_START) for k in keys - APPLIED)

    def reply(self, timeout: float | None) -> dict[str, Any] | None:
        if timeout is not None and not select.select([self.ctl_out], [], [], timeout)[0]:
            return None
        line = self.ctl_out.readline()
        if not line:
            raise RuntimeError(f"tests/zygote.py exited ({self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        self.ctl_in.close()
        self.proc.wait(10)


_IDLE: list[_Zygote] = []
MAX_IDLE = 3  # each holds ~0.5 GB (torch imported)


@atexit.register
def _close_all() -> None:
    while _IDLE:
        _IDLE.pop().close()


class PlainRun:
    """A forked plain run, as a Popen-like handle (``pid``, ``wait``, ``communicate``,
    ``kill``); its output is read from files once it exited."""

    def __init__(self, z: _Zygote, argv: list[str], cwd: str, env: dict[str, str]) -> None:
        self._z, self._dir = z, tempfile.mkdtemp(prefix="plainrun-")
        self.out, self.err = f"{self._dir}/out", f"{self._dir}/err"
        req = {"argv": argv, "cwd": cwd, "env": env, "out": self.out, "err": self.err}
        z.ctl_in.write(json.dumps(req).encode() + b"\n")
        z.ctl_in.flush()
        first = z.reply(None)
        assert first is not None
        self.pid: int = first["pid"]
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            got = self._z.reply(timeout)
            if got is None:
                raise subprocess.TimeoutExpired(["plain", str(self.pid)], timeout or 0)
            self.returncode = got["rc"]
            _IDLE.append(self._z)
        return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        out, err = Path(self.out).read_text(), Path(self.err).read_text()
        for f in (self.out, self.err):
            os.unlink(f)
        os.rmdir(self._dir)
        return out, err


def _forkable(cmd: Sequence[str]) -> bool:
    if len(cmd) < 2 or cmd[0] != sys.executable:
        return False
    return cmd[1] == "-c" and len(cmd) >= 3 or cmd[1].endswith(".py")


def start_plain(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> PlainRun | subprocess.Popen[str]:
    """A plain run started: forked where it can be, else a subprocess (stdout and stderr
    to pipes, text)."""
    argv = [os.fspath(c) for c in cmd]
    env = dict(os.environ if env is None else env)
    if _forkable(argv):
        # an idle zygote started in this environment (a test may have changed os.environ
        # since one was made), else a new one in it
        z = next((z for z in _IDLE if z.fits(env)), None)
        if z is not None:
            _IDLE.remove(z)
        else:
            while len(_IDLE) >= MAX_IDLE:
                _IDLE.pop(0).close()
            z = _Zygote(env)
        return PlainRun(z, argv[1:], os.path.abspath(cwd or os.getcwd()), env)
    return subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def run_plain(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(cmd, capture_output=True, text=True, ...)`` for a plain run."""
    p = start_plain(cmd, cwd=cwd, env=env)
    t0 = time.monotonic()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate(timeout=max(10.0, timeout - (time.monotonic() - t0)))
        raise
    rc = p.returncode
    assert rc is not None
    done = subprocess.CompletedProcess([os.fspath(c) for c in cmd], rc, out, err)
    if check:
        done.check_returncode()
    return done
