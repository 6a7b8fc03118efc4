"""What the metrics endpoint remembers between snapshots, so series do not churn.

Processes are labelled by what they are to the job (host, rank, role, worker index), not by
pid: DataLoader workers that are not persistent get new pids every epoch, and a label per
pid would add series every epoch. Counters over such labels must survive the processes
behind them, so a process's last CPU time (or batch count) is kept when it exits and added
to its label's total: the counter only grows, across epochs. A process whose role is not
known yet has no sample: the hook says hello with the first steps, so until a trainer has
(or ``STARTUP_GRACE_S`` passed, for a job without one), and for ``ROLE_GRACE_S`` after a
process appears (a loader names its new workers), so none is ``other`` first and ``main``
or ``worker`` seconds later.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from perftop.model import Snapshot

ROLE_GRACE_S = 5.0  # seconds a process may stay without a role before it is `other`
STARTUP_GRACE_S = 60.0  # no trainer said hello by then: roleless processes are `other`

Key = tuple[str, str, str, str]  # host, rank, role, worker


@dataclass(frozen=True, slots=True)
class ProcKey:
    """A live process under its stable labels."""

    host: str
    pid: int
    key: Key


def _s(x: object) -> str:
    return "" if x is None else str(x)


class Totals:
    """Monotonic totals per label set, fed each process's running total by identity."""

    def __init__(self) -> None:
        self.retired: dict[Hashable, float] = {}
        self.live: dict[Hashable, tuple[Hashable, float]] = {}  # ident -> (key, value)

    def observe(self, ident: Hashable, key: Hashable, value: float) -> None:
        old = self.live.get(ident)
        if old is not None and (old[0] != key or value < old[1]):
            # a new role (other -> worker) or a reused pid: keep what the old one counted
            self._retire(ident)
            if old[0] != key and value >= old[1]:
                self.retired[key] = self.retired.get(key, 0.0) - old[1]  # count only the rest
        self.live[ident] = (key, value)

    def sweep(self, alive: Iterable[Hashable]) -> None:
        """Fold every identity not in ``alive`` into its key's retired total."""
        keep = set(alive)
        for ident in [i for i in self.live if i not in keep]:
            self._retire(ident)

    def _retire(self, ident: Hashable) -> None:
        key, value = self.live.pop(ident)
        self.retired[key] = self.retired.get(key, 0.0) + value

    def totals(self) -> dict[Hashable, float]:
        out = dict(self.retired)
        for key, value in self.live.values():
            out[key] = out.get(key, 0.0) + value
        return out


class MetricsState:
    """Updated with every snapshot (the ingest thread); read by scrapes under a lock."""

    def __init__(self) -> None:
        self.first_seen: dict[tuple[str, int], float] = {}
        # a role once known stays: the loader of the next epoch lists only its own workers
        self.known: dict[tuple[str, int], Key] = {}
        self.cpu = Totals()
        self.batches = Totals()
        self.procs: tuple[ProcKey, ...] = ()
        self.hints_seen: set[tuple[str, str]] = set()

    def update(self, snap: Snapshot, now: float) -> None:
        local = snap.meta.host
        start = snap.meta.start_t
        settled = bool(snap.trainers) or snap.meta.ended or snap.meta.observer
        settled = settled or (start is not None and now - start >= STARTUP_GRACE_S)
        procs: list[ProcKey] = []
        for p in snap.processes:
            if not p.alive:
                continue
            host = p.host or local
            ident = (host, p.pid)
            self.first_seen.setdefault(ident, now)
            role = snap.role_of(p.pid, p.host or None)
            name = role.role if role is not None else "other"
            key: Key | None = self.known.get(ident)
            if key is None and name != "other":
                key = (
                    host,
                    _s(role.rank if role else None),
                    name,
                    _s(role.worker_id if role and name == "worker" else None),
                )
                self.known[ident] = key
            if key is None:
                if not settled or now - self.first_seen[ident] < ROLE_GRACE_S:
                    continue  # its role may not be known yet
                key = (host, "", "other", "")
            procs.append(ProcKey(host, p.pid, key))
            if p.cpu_seconds is not None:
                self.cpu.observe(ident, key, p.cpu_seconds)
        alive = {(p.host or local, p.pid) for p in snap.processes if p.alive}
        # a pid that is gone may come back as another process: forget what it was
        self.known = {i: k for i, k in self.known.items() if i in alive}
        self.first_seen = {i: t for i, t in self.first_seen.items() if i in alive}
        self.cpu.sweep((k.host, k.pid) for k in procs)
        self.procs = tuple(procs)

        live_workers = []
        for w in snap.workers:
            host = getattr(w, "host", "") or local
            role = snap.role_of(w.pid, getattr(w, "host", "") or None)
            wident = (host, w.pid, w.start_t)
            wkey = (host, _s(role.rank if role else None), str(w.worker_id))
            self.batches.observe(wident, wkey, float(w.batches))
            live_workers.append(wident)  # an exited worker's row keeps its final count
        self.batches.sweep(live_workers)
        for h in snap.hints:
            self.hints_seen.add((h.host or local, h.id))
