"""Which process is which: the hook's hellos and loader reports name the trainers and the
DataLoader workers; every other process of the job is ``other``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from perftop.fmt import loader_suffix
from perftop.model.snapshot import Loader, Meta, ProcessRole, Role, Snapshot, Trainer
from perftop.model.workers import WorkerRow

# Trainers (one main, or ranks by rank), then DataLoader workers, then every other process:
# the order of the report's processes and of the Processes panel's role column.
ROLE_ORDER = {"main": 0, "rank": 0, "worker": 1, "other": 2}
_ROLES: dict[str, Role] = {"main": "main", "rank": "rank", "worker": "worker", "other": "other"}


def ranked(rank: int | None, world_size: int | None) -> bool:
    """A rank of a distributed job (its hello's rank, in a world of more than one), not a
    lone trainer that says rank 0."""
    return rank is not None and (world_size or 0) > 1


def as_role(name: str) -> Role:
    """A role as read off the stream (stack samples name theirs); an unknown one is other."""
    return _ROLES.get(name, "other")


def role_text(role: ProcessRole | None, recorded: str = "other", of_rank: bool = False) -> str:
    """A process's role in words: ``rank 1``, ``worker 0`` (with its loader where the job
    has several; ``of_rank``: a rank's, ``r1 worker 0``, as every rank's loader numbers its
    workers from 0), ``main``; ``recorded`` (what an event said it was) where the job's
    roles do not have it."""
    if role is None:
        return recorded
    if role.role == "rank":
        return f"rank {role.rank}" if role.rank is not None else "rank"
    if role.role == "worker":
        text = "worker" if role.worker_id is None else f"worker {role.worker_id}"
        rank = f"r{role.rank} " if of_rank and role.rank is not None else ""
        return rank + text + loader_suffix(role.loader_id)
    return role.role


def _of_rank(role: ProcessRole, parent: ProcessRole | None) -> bool:
    """A worker whose parent is a rank: its label names the rank."""
    return role.role == "worker" and parent is not None and parent.role == "rank"


def rank_workers(roles: Iterable[ProcessRole]) -> set[tuple[str, int]]:
    """(host, pid) of the workers whose parent is a rank (a table's rows, at once)."""
    by_key = {(r.host, r.pid): r for r in roles}
    return {key for key, r in by_key.items()
            if _of_rank(r, by_key.get((r.host, r.parent_pid or 0)))}  # fmt: skip


def role_of_pid(snap: Snapshot, pid: int, recorded: str = "other", host: str = "") -> str:
    """:func:`role_text` of ``pid`` (on ``host``, a collector's) in ``snap``."""
    role = snap.role_of(pid, host or None)
    if role is None:
        return recorded
    parent = snap.role_of(role.parent_pid, role.host) if role.parent_pid else None
    return role_text(role, recorded, _of_rank(role, parent))


def assign_roles(
    meta: Meta,
    trainers: Iterable[Trainer],
    loaders: Iterable[Loader],
    processes: Iterable[Any] = (),
    observed: dict[int, str] | None = None,
    workers: Iterable[WorkerRow] = (),
    worker_loader: dict[int, int] | None = None,
    gone: set[int] | None = None,
) -> tuple[ProcessRole, ...]:
    """Roles for every pid we know of, trainers first, then workers, then the rest.

    A trainer is ``rank`` when torchrun gave it a rank and ``main`` otherwise; a pid that is
    a worker of a loader is ``worker`` with its index; any other pid (the launcher, a shell
    script, helpers) is ``other``. ``processes`` are probe rows with ``pid`` and ``ppid``.
    ``observed`` are roles read from stack samples of processes without a hook (observer
    mode: the root is ``main``, a process inside DataLoader's worker loop is ``worker``).
    ``workers`` are the workers' own reports: they keep the workers of earlier epochs (whose
    loader has since started new ones) workers, and ``worker_loader`` (worker pid to loader
    id, from every report of each loader) keeps their loader. ``gone`` (live snapshots
    only) are pids that exited a while ago: their workers leave the live view, as their
    probe rows do (a loader without persistent workers has new ones each epoch, an
    evaluation loader each evaluation: kept, they piled up as rows of N/A).
    """
    gone = gone or set()
    roles: dict[int, ProcessRole] = {}
    for t in trainers:
        role: Role = "rank" if ranked(t.rank, t.world_size) else "main"
        roles[t.pid] = ProcessRole(t.pid, role, rank=t.rank, parent_pid=t.ppid)
    for ld in loaders:
        for worker_id, pid in ld.workers:
            if pid in gone:
                continue
            if pid not in roles or roles[pid].role == "worker":
                roles[pid] = ProcessRole(
                    pid,
                    "worker",
                    rank=_rank(roles, ld.pid),
                    worker_id=worker_id,
                    loader_id=ld.loader_id,
                    parent_pid=ld.pid,
                )
    for w in workers:
        if w.pid not in roles and w.pid not in gone:
            roles[w.pid] = ProcessRole(
                w.pid, "worker", rank=_rank(roles, w.ppid), worker_id=w.worker_id,
                loader_id=(worker_loader or {}).get(w.pid), parent_pid=w.ppid,
            )  # fmt: skip
    for pid, seen in (observed or {}).items():
        if pid not in roles and seen in ("main", "worker"):
            roles[pid] = ProcessRole(pid, "main" if seen == "main" else "worker")
    if meta.job_pid is not None and meta.job_pid not in roles:
        roles[meta.job_pid] = ProcessRole(meta.job_pid, "other")
    for p in processes:
        other: int | None = getattr(p, "pid", None)
        if other is not None and other not in roles:
            roles[other] = ProcessRole(other, "other", parent_pid=getattr(p, "ppid", None))
    return tuple(sorted(roles.values(), key=role_sort_key))


def role_sort_key(r: ProcessRole) -> tuple[int, ...]:
    """Trainers by rank, then workers by their trainer's rank, loader and index, then the
    rest; the pid last, so no two processes tie."""
    return (
        ROLE_ORDER.get(r.role, ROLE_ORDER["other"]),
        r.rank if r.rank is not None else -1,
        r.loader_id or 0,
        r.worker_id if r.worker_id is not None else -1,
        r.pid,
    )


def _rank(roles: dict[int, ProcessRole], pid: int) -> int | None:
    r = roles.get(pid)
    return r.rank if r is not None else None
