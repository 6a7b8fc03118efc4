"""Running the real perftop CLI on real training subprocesses."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

WORKLOADS = Path(__file__).resolve().parent / "workloads"


def needs(*packages: str) -> None:
    """Skip the calling test module unless each package is installed. Found, not imported:
    ``pytest.importorskip`` imported ignite, PyG, SB3 and Ray (and torch under them) at
    collection, in each of the suite's test workers: ~6 CPU-s a worker, for modules that
    only run them in subprocesses."""
    import pytest

    missing = [p for p in packages if importlib.util.find_spec(p) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}", allow_module_level=True)


# Commands that only read recordings (no process, terminal, signal or socket of their own)
# run the CLI's own main() in the test's process: a subprocess for each of the suite's
# ~150 reports cost ~0.2 CPU-s of start-up on CI's 2 cores. test_cli.py and
# test_replay_cli.py run them as subprocesses (perftop_process).
IN_PROCESS = frozenset({"report", "diff", "export"})


def perftop(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``perftop ARGS`` in ``cwd``: its exit code, stdout and stderr."""
    if args and args[0] in IN_PROCESS:
        return _perftop_here(args, cwd)
    return perftop_process(*args, cwd=cwd, timeout=timeout)


def _perftop_here(args: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    from perftop.cli import main

    out, err, back = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(args))
            except SystemExit as exc:  # argparse's usage errors
                rc = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        os.chdir(back)
    return subprocess.CompletedProcess(["perftop", *args], rc, out.getvalue(), err.getvalue())


def perftop_process(
    *args: str, cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m perftop ARGS`` as a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "perftop", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def run_and_report(
    tmp_path: Path, *cmd: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    rec = tmp_path / "r.perftop"
    proc = perftop("run", "--headless", "--record", str(rec), "--", *cmd, cwd=tmp_path)
    rep = perftop("report", "--json", str(rec), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    out = json.loads(rep.stdout)
    assert not internal_errors(out), internal_errors(out)
    return proc, out


def internal_errors(rep: dict[str, Any]) -> list[str]:
    """The notes of a report that say perftop itself failed (a hook's error, the session
    model's): every real run of the suite has none, whatever else it checks."""
    return [
        n["text"]
        for n in rep.get("notes", ())
        if n["text"].startswith("perftop hook error") or "session model failed" in n["text"]
    ]


# Another user's busy process: a session of its own (Linux's autogroup weighs it as another
# login), spinning for at most a minute, on the cores given (all where none), at the nice
# given (its autogroup too: a niced process in the suite's own group would still take that
# group's fair share from the other tests' jobs).
SPIN = """import os, sys, time
os.setsid()
if sys.argv[1]:
    os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(",")})
if sys.argv[2] != "0":
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(sys.argv[2])
    except OSError:
        pass
    os.nice(int(sys.argv[2]))
end = time.monotonic() + 60
while time.monotonic() < end:
    pass"""


@contextlib.contextmanager
def spinning(*spinners: tuple[str, int]) -> Iterator[None]:
    """Other users' busy processes while the block runs: (cores, nice) each."""
    procs = [
        subprocess.Popen([sys.executable, "-S", "-c", SPIN, cores, str(nice)],
                         stdin=subprocess.DEVNULL)
        for cores, nice in spinners
    ]  # fmt: skip
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def default_sigint() -> None:
    """In a child before exec: SIGINT as a terminal's foreground job has it. A shell that
    runs the suite in the background ignores SIGINT, and a child inherits that (perftop
    keeps the job's inherited dispositions, as the job would have them alone)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn_slow_job(tmp_path: Path, *record: str, **popen: Any) -> subprocess.Popen[str]:
    """`perftop run --headless RECORD... -- python slow_steps.py`, started and ready (the
    job has printed "ready"); ``record`` is e.g. ("--record", path) or ("--no-record",)."""
    popen.setdefault("preexec_fn", default_sigint)
    mon = subprocess.Popen(
        [sys.executable, "-m", "perftop", "run", "--headless", *record, "--", sys.executable,
         str(WORKLOADS / "slow_steps.py")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, **popen)  # fmt: skip
    assert mon.stdout is not None and mon.stdout.readline().strip() == "ready"
    return mon


def until_step(mon: subprocess.Popen[str], n: int = 50, timeout: float = 60) -> None:
    """Read a :func:`spawn_slow_job`'s output until its job printed ``step N`` (it prints
    every 50th step): N steps done, rather than a fixed sleep that may be too short or long."""
    assert mon.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = mon.stdout.readline()
        assert line, f"the job ended before step {n}"
        if line.split()[:2] == ["step", str(n)]:
            return
    raise AssertionError(f"no step {n} within {timeout} s")


def listening(path: Path) -> Any:
    """A bound, listening Unix socket at ``path`` that never reads: enough of a monitor for
    the hook to arm (it arms only when one answers). Close it when done."""
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(64)
    return s


def replay_bench() -> Any:
    """``benchmarks/replay.py`` as a module: its generator writes large synthetic recordings."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "replay.py"
    spec = importlib.util.spec_from_file_location("bench_replay", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def send_as_nobody(sock_path: Path, data: bytes) -> None:
    """Connect to ``sock_path`` as another user (uid 65534, "nobody"), send ``data`` and
    wait for a byte: what SO_PEERCRED must refuse. The socket's directory and mode must let
    that user connect (the tests loosen them)."""
    code = (
        "import socket,sys;s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);"
        f"s.sendall({data!r});s.recv(1)"
    )
    subprocess.run(
        ["/usr/bin/python3", "-c", code, str(sock_path)],
        user=65534, timeout=20, capture_output=True, check=False,
    )  # fmt: skip


# A job already training when the hook arrives, as an injected one is: one SGD step of a
# Linear layer, then ``step()`` for the code after the hook.
INJECTED_PRELUDE = (
    "import torch\n"
    "m = torch.nn.Linear(2, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
    "def step():\n"
    "    opt.zero_grad(); m(torch.randn(4, 2)).sum().backward(); opt.step()\n"
    "step()\n"
)


@contextlib.contextmanager
def injected_job(
    tmp: Path, after: str
) -> Iterator[tuple[subprocess.CompletedProcess[str], list[Any]]]:
    """A job that runs ``INJECTED_PRELUDE``, gets the hook as ``sys.remote_exec`` would
    inject it (run by hand, without perftop's path), then runs ``after``; connected to a
    real monitor socket, whose events the list gathers while the block runs."""
    from perftop.monitor import inject
    from perftop.monitor.server import Server

    got: list[Any] = []
    srv = Server(lambda f, e: got.extend(e), tmp / "s.sock").start()
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PERFTOP_SOCKET")}
        script = INJECTED_PRELUDE + inject.hook_script(str(srv.path)) + after
        proc = subprocess.run([sys.executable, "-c", script], env=env, timeout=60,
                              capture_output=True, text=True, check=True)  # fmt: skip
        yield proc, got
    finally:
        srv.close()


def closing_session(closes: bool, close: bool, ended: bool = True) -> Any:
    """The snapshot of a training process (pid 42) that sent five steps, whose hook says
    it ``closes`` its stream and did (``close``) or not, and of the job's exit (``ended``)."""
    from perftop.events import Hello, HookClose, JobExit, Step
    from perftop.model import Session

    s = Session()
    s.apply(Hello(1.0, 42, 1, "h", ("train.py",), closes=closes))
    for i in range(5):
        s.apply(Step(42, i, 2.0 + i, 2.5 + i))
    if close:
        s.apply(HookClose(8.0, 42))
    if ended:
        s.apply(JobExit(9.0, 42, 0))
    return s.snapshot()


def count_selects(sel: Any) -> list[int]:
    """Count a selector's ``select()`` calls (a thread's wake-ups): ``[calls]``, kept up to
    date as it is called."""
    calls = [0]
    select = sel.select

    def counted(timeout: float | None = None) -> Any:
        calls[0] += 1
        return select(timeout)

    sel.select = counted
    return calls


CGROUPS = Path("/sys/fs/cgroup")


@contextlib.contextmanager
def new_cgroup(
    controller: str, v1_dirs: tuple[str, ...], v2: dict[str, str], v1: dict[str, str]
) -> Iterator[Path]:
    """A new cgroup under ``controller`` (v2's unified tree, or v1's first of ``v1_dirs``),
    its files set as ``v2`` or ``v1`` says (in order; a file this kernel lacks is passed
    over unless it is the first), removed after its processes left; skips where this
    machine lets no one make one (not root, no such controller)."""
    unified = (CGROUPS / "cgroup.controllers").exists()
    base = CGROUPS if unified else next(
        (CGROUPS / d for d in v1_dirs if (CGROUPS / d).is_dir()), None
    )  # fmt: skip
    have = (CGROUPS / "cgroup.controllers").read_text().split() if unified else []
    if base is None or (unified and controller not in have):
        pytest.skip(f"no cgroup {controller} controller on this machine")
    d = base / f"perftop-test-{uuid.uuid4().hex[:8]}"
    try:
        if unified and controller not in (CGROUPS / "cgroup.subtree_control").read_text().split():
            (CGROUPS / "cgroup.subtree_control").write_text(f"+{controller}")
        d.mkdir()
        for i, (name, value) in enumerate((v2 if unified else v1).items()):
            if i == 0 or (d / name).exists():
                (d / name).write_text(value)
    except OSError as e:
        if d.exists():
            d.rmdir()
        pytest.skip(f"cannot make a cgroup with a {controller} limit here: {e}")
    try:
        yield d
    finally:
        for _ in range(50):  # its last process may take a moment to leave it
            try:
                d.rmdir()
                break
            except OSError:
                time.sleep(0.1)
