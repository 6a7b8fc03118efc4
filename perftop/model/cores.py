"""The cores a job may use, against the host's: what its training processes' CPU affinity
and cgroup CPU limit leave it (probes/cpulimit.py reads both).

Why the CPU hints need it: a Slurm step or a container gets a few of a node's cores. Its
threads take turns on those, however many the host has, and a core of theirs can be full
while the host is mostly idle; a limit (``docker --cpus``, Kubernetes ``limits.cpu``)
holds the job back once it has used its share of each period, with every core free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from perftop.fmt import count
from perftop.model.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class JobCores:
    """``usable``: the cores the job may keep busy (the host's where nothing limits it);
    ``cpus``: the CPUs its affinity allows, where fewer than the host's; ``quota``: its
    cgroup's limit in cores, where one is set and under ``cpus``; ``busy_percent``: how
    busy the CPUs it may run on are (the host's figure where it may run on all)."""

    usable: float
    host: int
    cpus: frozenset[int] | None = None
    quota: float | None = None
    busy_percent: float | None = None

    def text(self) -> str:
        """'2 cores', '2 of 16 cores (its CPU affinity)', '1.5 cores (its cgroup's CPU
        limit; the host has 16)'."""
        if self.quota is not None:
            unit = "core" if self.quota == 1 else "cores"
            return f"{self.quota:g} {unit} (its cgroup's CPU limit; the host has {self.host})"
        if self.cpus is not None:
            return f"{len(self.cpus)} of {self.host} cores (its CPU affinity)"
        return count(self.host, "core")


# The last snapshot asked and its cores, replaced as one tuple: four rules, the Host panel
# (twice) and the report ask for the same snapshot's (as hints.base.loop keeps its loop).
_last: tuple[Snapshot | None, JobCores | None] = (None, None)


def allowed_cores(snap: Snapshot) -> JobCores:
    """What the live training processes may use: the union of their affinities and the
    largest of their limits (a job's processes share a cgroup and an affinity as a rule)."""
    global _last
    last = _last
    if last[0] is snap and last[1] is not None:
        return last[1]
    jc = _allowed(snap)
    _last = (snap, jc)
    return jc


def _allowed(snap: Snapshot) -> JobCores:
    host = snap.host.cpu_count
    pids = {t.pid for t in snap.trainers}
    rows = [p for p in snap.processes if p.alive and p.pid in pids]
    allowed: set[int] = set()
    for p in rows:
        allowed |= cpu_set(p.cpus) or set(range(host))
    cpus = frozenset(allowed) if rows and host and len(allowed) < host else None
    quotas = [p.cpu_quota for p in rows if p.cpu_quota is not None]
    quota = max(quotas) if quotas and len(quotas) == len(rows) else None
    n = len(cpus) if cpus is not None else host
    if quota is not None and quota >= n:
        quota = None  # the limit does not bind: the CPUs it may run on do
    busy = snap.host.cpu_percent
    per = snap.host.per_core
    if cpus is not None and len(per) == host and all(c < host for c in cpus):
        busy = round(sum(per[c] for c in cpus) / len(cpus), 1)
    usable = quota if quota is not None else float(n)
    return JobCores(usable, host, cpus, quota, busy)


@lru_cache(maxsize=64)
def cpu_set(text: str | None) -> frozenset[int]:
    """The CPUs of a kernel list ("0-3,8"); empty for None or a list that is not one."""
    out: set[int] = set()
    for part in (text or "").split(","):
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            return frozenset()
        if not 0 <= a <= b < 1 << 16:
            return frozenset()
        out.update(range(a, b + 1))
    return frozenset(out)


def whole(cores: float) -> int:
    """Cores as a count of threads that fit: 1.5 -> 1, at least 1."""
    return max(1, math.floor(cores + 1e-9))
