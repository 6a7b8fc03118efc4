"""No silent absence: a Python process of the job that never got perftop's hook, and why.

The hook connects to the monitor as soon as its process imports torch (see
``perftop.hook._on_torch``), so a process that has torch loaded and never connected has no
hook. The reason is read from outside, in this order:

- its Python is older than 3.10 (the hook's minimum: the bootstrap stays out);
- it was started with ``-I``, ``-E`` or ``-S`` (PYTHONPATH ignored, or no site import:
  the bootstrap never runs);
- its environment lost perftop's: a ``PYTHONPATH`` without the bootstrap's folder (the
  command or a script set it rather than adding to it: ``env PYTHONPATH=src python ...``,
  ``export PYTHONPATH=...``), or no ``PERFTOP_SOCKET`` (``env -i``), read from
  ``/proc/PID/environ`` as the process started; said once it has torch loaded;
- otherwise its bootstrap failed (``PERFTOP_DEBUG=1`` prints why in the job's stderr).

The first two are said as soon as the process is seen; the last once torch has been loaded
for ``grace_s`` without a connection and the process has run :data:`GRACE_CPU_S` on the CPU
since (the rest of torch's import, after its C library is mapped, is a few CPU-seconds: on
a busy host it outlasts ``grace_s`` of wall time, and a hooked process was said to have
failed), or when the process exits. Never said about
torch.compile's compile workers (no hook by design) or a fork of a hooked process (its
hook stays silent until it has something to send). A snapshot subscriber of the hub; the
/proc reads run on a thread of their own, so the hub never waits.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

import psutil

from perftop.events import Note
from perftop.fmt import clip
from perftop.hook import ENV_SOCKET
from perftop.model import Snapshot
from perftop.monitor.inject import python_version
from perftop.monitor.jobenv import BOOTSTRAP_DIR

MIN_PYTHON = (3, 10)
GRACE_S = 10.0  # torch loaded this long without a connection: the hook is not coming
GRACE_CPU_S = 6.0  # ... and this much CPU run since (torch's import takes ~1-3 CPU-s)
CHECK_EVERY_S = 1.0
# A Python process seen this many checks without torch is read less often (its maps, every
# check: a dozen of Ray's daemons never load torch, ~0.2 ms each): the gap doubles up to
# TORCH_GAP_S. The first seconds stay dense: a process that loads torch late and exits is
# still seen with it.
DENSE_CHECKS, TORCH_GAP_S = 10, 8.0
_PYTHON = re.compile(r"python[\d.]*$")
_FLAGS = {"I": "-I (isolated mode)", "E": "-E (PYTHON* variables ignored)", "S": "-S (no site)"}
_TORCH = ("libtorch_python", "/torch/_C")


def python_flags(argv: list[str]) -> list[str]:
    """The interpreter options in ``argv`` (the interpreter first) that keep the hook out."""
    found: list[str] = []
    args = iter(argv[1:])
    for a in args:
        if a in ("-c", "-m") or not a.startswith("-") or a == "-":
            break
        if a in ("-W", "-X"):  # their value is the next argument
            next(args, None)
            continue
        if a.startswith("--"):
            continue
        for ch in a[1:]:
            if ch in _FLAGS and _FLAGS[ch] not in found:
                found.append(_FLAGS[ch])
            if ch in "cmXW":  # the rest of this argument is that option's value
                break
    return found


def has_torch(pid: int) -> bool | None:
    """Whether ``pid`` has torch's C library loaded; None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return any(t.encode() in data for t in _TORCH)


class HooklessWatch:
    """``HooklessWatch(root_pid, hub.submit, server.peer_pids)``, appended to
    ``hub.snapshot_subscribers``."""

    background_ok = True

    def __init__(
        self,
        root_pid: int,
        submit: Callable[..., None],
        connected: Collection[int],
        grace_s: float = GRACE_S,
        grace_cpu_s: float = GRACE_CPU_S,
    ) -> None:
        self.root = root_pid
        self.submit = submit
        self.connected = connected
        self.grace_s, self.grace_cpu_s = grace_s, grace_cpu_s
        self.said: set[int] = set()
        # pid -> (first seen, its CPU time then, label)
        self.torch_since: dict[int, tuple[float, float | None, str]] = {}
        self.no_torch: dict[int, tuple[int, float, float]] = {}  # pid -> (looks, next, gap)
        self.lost: dict[int, str | None] = {}  # pid -> how its environment lost perftop's
        self._next = 0.0
        self._busy = threading.Lock()

    def __call__(self, snap: Snapshot) -> None:
        now = time.monotonic()
        if now < self._next or not self._busy.acquire(blocking=False):
            return
        self._next = now + CHECK_EVERY_S
        rows = [(p.pid, p.ppid, p.cmdline, p.name, p.alive) for p in snap.processes]
        hello = {t.pid for t in snap.trainers} | {r.pid for r in snap.roles if r.role != "other"}
        if not self.torch_since and not any(self._open(r, hello) for r in rows):
            self._busy.release()  # every Python process hooked or said: no thread to start
            return
        threading.Thread(
            target=self._check, args=(rows, hello), name="perftop-hookless", daemon=True
        ).start()

    def _open(self, row: tuple[Any, ...], hello: set[int]) -> bool:
        """Whether ``row`` is a Python process neither hooked nor said about yet."""
        pid = row[0]
        if pid in self.said or pid in hello or pid in self.connected:
            return False
        return _is_python(row[2], row[3])

    def _check(self, rows: list[tuple[Any, ...]], hello: set[int]) -> None:
        try:
            self._scan(rows, hello)
        except Exception:  # a /proc race must never stop the monitor
            pass
        finally:
            self._busy.release()

    def _scan(self, rows: list[tuple[Any, ...]], hello: set[int]) -> None:
        hooked = hello | set(self.connected)
        by_pid = {r[0]: r for r in rows}
        now = time.monotonic()
        for pid, _ppid, cmdline, name, alive in rows:
            if pid in self.said or pid in hooked:
                continue
            argv = cmdline.split()
            if not _is_python(cmdline, name):
                continue
            if _exempt(pid, by_pid, hooked):
                continue
            label = f"pid {pid} ({clip(cmdline, 60)})"
            version = python_version(pid) if alive else None
            if version is not None and version < MIN_PYTHON:
                self._say(pid, f"{label} runs Python {version[0]}.{version[1]}: perftop's "
                          "hook needs Python 3.10 or newer, so it has no hook (no steps "
                          "from it)")  # fmt: skip
                continue
            flags = python_flags(argv)
            if flags:
                self._say(pid, f"{label} was started with {', '.join(flags)}: Python never "
                          "ran perftop's bootstrap, so it has no hook (no steps from it)")  # fmt: skip
                continue
            if alive and pid not in self.lost:
                self.lost[pid] = lost_env(pid)
            looks = alive and pid not in self.torch_since and self.torch_due(pid, now)
            if looks and has_torch(pid):
                self.no_torch.pop(pid, None)
                why = self.lost.get(pid)
                if why:  # no hook can come: said at once
                    self._say(pid, f"{label} imported torch but has no hook: {why}, so "
                              "Python never ran perftop's bootstrap (no steps from it)")  # fmt: skip
                    continue
                self.torch_since[pid] = (now, cpu_s(pid), label)
        for pid in [p for p in self.no_torch if p not in by_pid]:
            del self.no_torch[pid]  # gone
        for pid in [p for p in self.lost if p not in by_pid]:
            del self.lost[pid]
        for pid, (since, cpu0, label) in list(self.torch_since.items()):
            if pid in hooked:
                del self.torch_since[pid]
                continue
            row = by_pid.get(pid)
            if row is None or not row[4] or (now - since >= self.grace_s and self._ran(pid, cpu0)):
                del self.torch_since[pid]
                self._say(pid, _failed(label))

    def _ran(self, pid: int, cpu0: float | None) -> bool:
        """``pid`` ran ``grace_cpu_s`` on the CPU since ``cpu0`` (or that cannot be read)."""
        now = cpu_s(pid)
        return cpu0 is None or now is None or now - cpu0 >= self.grace_cpu_s

    def torch_due(self, pid: int, now: float) -> bool:
        """Whether to read ``pid``'s maps for torch at this check: at each of its first
        :data:`DENSE_CHECKS`, then with a gap that doubles up to :data:`TORCH_GAP_S`."""
        looks, due, gap = self.no_torch.get(pid, (0, 0.0, CHECK_EVERY_S))
        if now < due:
            return False
        if looks >= DENSE_CHECKS:
            gap = min(gap * 2, TORCH_GAP_S)
        self.no_torch[pid] = (looks + 1, now + gap - 0.1 * CHECK_EVERY_S, gap)
        return True

    def finish(self) -> None:
        """The job has ended: every process seen with torch and never connected is said
        now (the last ones may have exited after the last check)."""
        if not self._busy.acquire(timeout=1.0):
            return
        try:
            hooked = set(self.connected)
            for pid, (_since, _cpu0, label) in list(self.torch_since.items()):
                if pid not in hooked:
                    self._say(pid, _failed(label))
            self.torch_since.clear()
        finally:
            self._busy.release()

    def _say(self, pid: int, text: str) -> None:
        self.said.add(pid)
        self.submit(Note(time.time(), "warning", "hook", text))


def cpu_s(pid: int) -> float | None:
    """``pid``'s CPU time (user and system), None where it cannot be read."""
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return t.user + t.system


def _is_python(cmdline: str, name: str | None) -> bool:
    """Whether a process runs a Python interpreter (by its command or its name)."""
    argv = cmdline.split(maxsplit=1)
    exe = os.path.basename(argv[0]) if argv else name
    return bool(_PYTHON.match(exe or "") or _PYTHON.match(name or ""))


def _exempt(pid: int, by_pid: dict[int, tuple[Any, ...]], hooked: set[int]) -> bool:
    """torch.compile's compile workers (and their pools), and forks of a hooked process."""
    row, seen = by_pid.get(pid), 0
    while row is not None and seen < 64:
        if "compile_worker" in row[2]:
            return True
        parent = by_pid.get(row[1]) if row[1] is not None else None
        if parent is not None and parent[2] == by_pid[pid][2] and parent[0] in hooked:
            return True
        row, seen = parent, seen + 1
    return False


def lost_env(pid: int) -> str | None:
    """How ``pid``'s environment, as it started, lost what perftop gave the job; None where
    it holds it or cannot be read."""
    try:
        env = psutil.Process(pid).environ()
    except (psutil.Error, OSError):
        return None
    path = env.get("PYTHONPATH", "")
    if str(BOOTSTRAP_DIR) not in path.split(os.pathsep):
        shown = f"PYTHONPATH={clip(path, 60)}" if path else "no PYTHONPATH"
        return (
            f"its environment has {shown}, without perftop's entry (the command or a "
            "script set PYTHONPATH rather than adding to it: PYTHONPATH=...:$PYTHONPATH "
            "keeps it)"
        )
    if ENV_SOCKET not in env:
        return f"its environment has no {ENV_SOCKET} (the job started it in a clean one)"
    return None


def _failed(label: str) -> str:
    return (
        f"{label} imported torch but its hook never said hello: its perftop bootstrap "
        "failed (run with PERFTOP_DEBUG=1 to see why), so it has no steps"
    )
