"""The cores a process may use: its CPU affinity and its cgroup's CPU limit.

Why: a Slurm step, a container (``docker --cpus``, a Kubernetes ``limits.cpu``) or a
``taskset`` gives a job a few of the host's cores. Against the host's core count, 8 busy
threads on a 64-core node look idle; against the 2 cores the job may use, they take turns.
The CPU hints weigh a job's threads and waits against these figures (hints/cores.py).
psutil has the affinity (``cpu_affinity``), not the limit: the limit is read from the
cgroup files the kernel publishes (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` over
``cpu.cfs_period_us``), the least of the process's cgroup and each cgroup above it. The
same read finds where its memory cgroup counts OOM kills (exits.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache

from perftop.fmt import cpu_list

ROOT = "/sys/fs/cgroup"
V1_DIRS = ("cpu,cpuacct", "cpu", "cpuacct,cpu")  # where a v1 hierarchy with cpu is mounted
MAX_DEPTH = 32  # cgroups walked up, at most


def read_affinity(pid: int) -> str | None:
    """The CPUs the process may run on, as :func:`cpu_list` writes them; None where this
    OS does not say or the process is gone."""
    try:
        return cpu_list(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        return None


def read_cpu_quota(pid: int, root: str = ROOT) -> float | None:
    """The cores the process's cgroup lets it use (quota / period, the least along its
    path up to the root); None where none is set or it cannot be read."""
    return read_cgroups(pid, root)[0]


def read_cgroups(pid: int, root: str = ROOT, quota: bool = True) -> tuple[float | None, str | None]:
    """One read of ``/proc/PID/cgroup``: (:func:`read_cpu_quota`'s cores, None without
    ``quota``, whose walk up the tree costs ~0.1 ms; the file where the process's own memory
    cgroup counts its OOM kills, or None where it is the root's, whose count is the host's:
    exits.py weighs an end against it)."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as f:
            lines = f.read(8192).splitlines()
    except OSError:
        return None, None
    limits: list[float] = []
    oom: str | None = None
    for line in lines:
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hid == "0" and not controllers:  # the v2 hierarchy
            base = root if _is_v2(root) else f"{root}/unified"
            limits += _walk(base, path, _v2_limit) if quota else []
            oom = oom or _oom_file(base, path, ("memory.events.local", "memory.events"))
        elif "cpu" in controllers.split(",") and quota:
            for d in V1_DIRS:
                if os.path.isdir(f"{root}/{d}"):
                    limits += _walk(f"{root}/{d}", path, _v1_limit)
                    break
        elif controllers == "memory":  # v1's own count: memory.oom_control, "oom_kill N"
            oom = _oom_file(f"{root}/memory", path, ("memory.oom_control",)) or oom
    return (round(min(limits), 3) if limits else None), oom


@lru_cache(maxsize=256)
def _oom_file(base: str, path: str, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` in the cgroup at ``path`` (not the root) that exists (kept:
    read at every tick; a cgroup removed since makes its count unread, the host's then)."""
    parts = _parts(path)
    if not parts:
        return None
    d = os.path.join(base, *parts)
    return next((f"{d}/{n}" for n in names if os.path.isfile(f"{d}/{n}")), None)


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p and p not in (".", "..")][:MAX_DEPTH]


@lru_cache(maxsize=4)
def _is_v2(root: str) -> bool:
    return os.path.exists(f"{root}/cgroup.controllers")


def _walk(base: str, path: str, limit: Callable[[str], float | None]) -> list[float]:
    """The limits set in the cgroup at ``path`` and each one above it."""
    out: list[float] = []
    parts = _parts(path)
    for n in range(len(parts), -1, -1):
        v = limit(os.path.join(base, *parts[:n]))
        if v is not None:
            out.append(v)
    return out


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(64).strip()
    except OSError:
        return None


def _v2_limit(d: str) -> float | None:
    text = _read(f"{d}/cpu.max")  # "max 100000" (none) or "50000 100000"
    if text is None:
        return None
    return _cores(*(text.split() + ["", ""])[:2])


def _v1_limit(d: str) -> float | None:
    quota, period = _read(f"{d}/cpu.cfs_quota_us"), _read(f"{d}/cpu.cfs_period_us")
    return None if quota is None or period is None else _cores(quota, period)


def _cores(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None  # "max": no limit
    return q / p if q > 0 and p > 0 else None
