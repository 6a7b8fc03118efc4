"""The sessions on this machine, found through their sockets in the per-user directory.

A socket whose monitor is gone (it refuses connections, or its owner pid is dead) is
removed and never listed. Other Python processes with torch loaded are observer
candidates for ``perftop attach PID``.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from perftop.monitor.server import INFO_MAGIC
from perftop.monitor.sockpath import SUFFIX, socket_dirs
from perftop.peer import same_user
from perftop.probes.procread import descendants

INFO_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class Candidate:
    """A Python process with torch loaded that no perftop session watches."""

    pid: int
    command: str
    start_t: float
    children: int


class Dead(Exception):
    """Nothing listens on the socket any more: its monitor is gone."""


def query(path: Path, timeout: float = INFO_TIMEOUT_S) -> dict[str, Any] | None:
    """The session's own description; None when it did not answer in time. Raises
    :class:`Dead` when no monitor listens there."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            raise Dead(str(path)) from None
        if not same_user(s):
            return None  # another user's socket: not asked, not listed, not removed
        s.sendall(INFO_MAGIC)
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except (OSError, TimeoutError):
        return None
    finally:
        s.close()
    try:
        info = json.loads(buf)
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def sessions(directory: Path | None = None) -> list[dict[str, Any]]:
    """Every live session, oldest first; dead sockets are unlinked on the way."""
    dirs = [directory] if directory is not None else socket_dirs()
    out = []
    for path in sorted(p for d in dirs for p in d.glob(f"*{SUFFIX}")):
        try:
            info = query(path)
        except Dead:
            try:
                path.unlink()
            except OSError:
                pass
            continue
        if info is None:
            continue  # alive but too busy to answer: not listed now, not removed either
        info["socket"] = str(path)
        out.append(info)
    out.sort(key=lambda i: i.get("start_t") or 0)
    return out


def session_pids(info: dict[str, Any]) -> set[int]:
    """The monitor, the job and every process under the job."""
    pids = {int(p) for p in info.get("pids") or ()}
    for key in ("monitor_pid", "job_pid"):
        if info.get(key):
            pids.add(int(info[key]))
    if info.get("job_pid"):
        pids.update(descendants(int(info["job_pid"])))
    return pids


def has_torch(pid: int) -> bool:
    """Whether libtorch is mapped into ``pid`` (read from /proc/PID/maps, cheap)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            for line in f:
                if b"libtorch" in line:
                    return True
    except OSError:
        return False
    return False


def candidates(exclude: set[int]) -> list[Candidate]:
    """Top processes of Python trees with torch loaded (workers counted, not listed)."""
    me = os.getuid()
    found: dict[int, psutil.Process] = {}
    for p in psutil.process_iter(["pid", "name", "uids", "cmdline"]):
        try:
            if p.pid in exclude or p.pid == os.getpid():
                continue
            uids = p.info.get("uids")
            if uids is not None and uids.real != me and me != 0:
                continue
            names = [p.info.get("name") or "", *(p.info.get("cmdline") or [])[:1]]
            if not any("python" in n.rsplit("/", 1)[-1] for n in names):
                continue
            if has_torch(p.pid):
                found[p.pid] = p
        except psutil.Error:
            continue
    out = []
    for pid, p in found.items():
        try:
            parent = found.get(p.ppid())
            argv = p.info.get("cmdline") or []
            if parent is not None and _is_worker(argv, parent.info.get("cmdline") or []):
                continue  # a DataLoader / multiprocessing worker of a listed process
            cmd = " ".join(argv or [p.info.get("name") or ""])
            kids = sum(1 for c in p.children(recursive=True) if c.pid in found)
            out.append(Candidate(pid, cmd, p.create_time(), kids))
        except psutil.Error:
            continue
    out.sort(key=lambda c: c.start_t)
    return out


def _is_worker(cmd: list[str], parent_cmd: list[str]) -> bool:
    """A forked worker keeps its parent's command line; a spawned one runs multiprocessing."""
    return cmd == parent_cmd or any("multiprocessing" in c for c in cmd)


def job_top(pid: int) -> int:
    """The training a DataLoader worker belongs to: up from ``pid`` while it is a forked
    or spawned worker of a Python process with torch loaded; else ``pid`` itself."""
    try:
        p = psutil.Process(pid)
        while True:
            parent = p.parent()
            if parent is None or not has_torch(parent.pid):
                return p.pid
            if not _is_worker(p.cmdline(), parent.cmdline()):
                return p.pid
            p = parent
    except psutil.Error:
        return pid


def find_session(target: str, directory: Path | None = None) -> dict[str, Any] | None:
    """The session ``target`` names: its socket path, socket name, or a pid in it."""
    all_ = sessions(directory)
    for info in all_:
        path = Path(info["socket"])
        if target in (str(path), path.name, path.stem):
            return info
    if target.isdigit():
        pid = int(target)
        for info in all_:
            if pid in session_pids(info):
                return info
    return None


def only_session(found: list[dict[str, Any]]) -> str | None:
    """The socket of the one session in ``found`` (``perftop attach`` with no TARGET), None
    where there are none or several: the user names one then (``perftop ls``)."""
    return str(found[0]["socket"]) if len(found) == 1 else None
