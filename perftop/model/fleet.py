"""A collector's model: one session per node, merged into one snapshot.

Pids are unique only per host, and two nodes' events may carry the same pid, so each node's
events (between :class:`~perftop.events.NodeScope` markers) go to that node's own
:class:`Session`, untouched. The merged snapshot tags every per-process row with its node
(``host``), so the TUI and the report can tell ``rank 3`` on one node from the same pid on
another. Without node markers it is exactly a plain session (a local run's recording).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from perftop.events import Event, Hello, NodeLink, NodeScope
from perftop.model.comm_fleet import FleetComm
from perftop.model.session import Session
from perftop.model.snapshot import Meta, NodeRow, NoteRow, Snapshot
from perftop.model.steps import LIVE_WINDOW
from perftop.wire import counts_as


class FleetSession:
    """Same interface as :class:`Session` (``apply``, ``apply_all``, ``snapshot``)."""

    def __init__(self, new_session: Callable[[], Session] = Session) -> None:
        """``new_session`` makes each node's session (``perftop.hints.hinted_session``
        for one that shows hints)."""
        self.new_session = new_session
        self.local = new_session()  # the collector's own events
        self.nodes: dict[str, Session] = {}
        self.links: dict[str, bool] = {}
        self._current = self.local
        self._tags: dict[str, _Tags] = {}  # per node: its rows tagged at the last snapshot
        self.events = 0
        self.last_t: float | None = None
        self.comm = FleetComm()  # collectives lined up across the nodes
        self._node_name = ""

    def apply(self, ev: Event) -> None:
        if isinstance(ev, NodeScope):
            self._current = self._node(ev.node) if ev.node else self.local
            self._node_name = ev.node
            return
        if isinstance(ev, NodeLink):
            self._node(ev.node)
            self.links[ev.node] = ev.connected
        self.events += counts_as(ev)
        if isinstance(ev, Hello) and self._node_name and ev.host != self._node_name:
            # the node's name is its host here: what its rows are tagged with, and what its
            # hints name its ranks by (two nodes on one machine share a host name)
            ev = replace(ev, host=self._node_name)
        self._current.apply(ev)
        self.comm.apply(self._node_name, ev)
        lt = self._current.last_t
        if lt is not None and (self.last_t is None or lt > self.last_t):
            self.last_t = lt

    @property
    def reducers(self) -> list[Any]:
        """The first node's reducers (the local ones before any node), for code that reads
        a session's internals (replay, diff): a fleet has no single set."""
        return next(iter(self.nodes.values()), self.local).reducers

    def _node(self, name: str) -> Session:
        s = self.nodes.get(name)
        if s is None:
            s = self.nodes[name] = self.new_session()
            s.node = name  # its hints name its ranks' node, as its rows are tagged
        return s

    def apply_all(self, events: Iterable[Event]) -> None:
        for ev in events:
            self.apply(ev)

    def snapshot(self, *, now: float | None = None, window: int | None = LIVE_WINDOW) -> Snapshot:
        now = now if now is not None else self.last_t
        local = self.local.snapshot(now=now, window=window)
        if not self.nodes:
            return local
        nodes = {n: s.snapshot(now=now, window=window) for n, s in self.nodes.items()}
        tags = {n: self._tags.setdefault(n, _Tags()) for n in nodes}
        merged = merge(local, nodes, self.links, self.events, tags)
        return replace(merged, comm=self.comm.stats(merged.ranks, merged.meta, window))


class _Tags:
    """A node's rows tagged with its name. A row already naming it is kept as it is; a
    row that is the same object as at the last snapshot (a process sample between two
    probe ticks) keeps its tagged copy, so a snapshot copies only what changed."""

    def __init__(self) -> None:
        self.last: dict[int, tuple[Any, Any]] = {}  # id(row) -> (row, its tagged copy)
        self.now: dict[int, tuple[Any, Any]] = {}

    def __call__(self, rows: Iterable[Any], host: str) -> list[Any]:
        out = []
        for r in rows:
            if r.host == host:
                out.append(r)
                continue
            hit = self.last.get(id(r))
            if hit is None or hit[0] is not r:
                hit = (r, replace(r, host=host))
            self.now[id(r)] = hit
            out.append(hit[1])
        return out

    def done(self) -> None:
        self.last, self.now = self.now, {}


def merge(
    local: Snapshot,
    nodes: dict[str, Snapshot],
    links: dict[str, bool],
    events: int,
    tags: dict[str, _Tags] | None = None,
) -> Snapshot:
    """One view of every node: per-process rows tagged with their node, ranks in rank
    order, the collector's own notes first. Host and GPU panels show the first node's host
    (the report lists every node's GPUs)."""
    parts: dict[str, list[Any]] = {
        k: []
        for k in (
            "ranks", "trainers", "loaders", "roles", "processes", "gpus", "sync", "between",
            "stalls",  # each node's perftop dumps its own ranks' stacks
            "ended",
        )
    }  # fmt: skip
    parts["hints"] = []
    notes: list[NoteRow] = list(local.notes)
    output = list(local.output)
    rows: list[NodeRow] = []
    for name, s in nodes.items():
        tag = tags[name] if tags is not None and name in tags else _Tags()
        for key in parts:
            parts[key].extend(tag(getattr(s, key), name))
        tag.done()
        notes.extend(replace(n, source=f"{name}/{n.source}") for n in s.notes)
        output.extend(s.output)
        rows.append(
            NodeRow(
                name,
                links.get(name, False),
                s.meta.state,
                s.events,
                s.meta.dropped_events,
            )
        )
    ranks = sorted(parts["ranks"], key=lambda r: (r.rank is None, r.rank or 0, r.host))
    first = next(iter(nodes.values()))
    return replace(
        local,
        meta=_meta(local.meta, [s.meta for s in nodes.values()]),
        steps=ranks[0] if ranks else local.steps,
        ranks=tuple(ranks),
        trainers=tuple(parts["trainers"]),
        loaders=tuple(parts["loaders"]),
        roles=tuple(parts["roles"]),
        processes=tuple(parts["processes"]),
        ended=tuple(parts["ended"]),
        host=first.host,
        gpus=tuple(parts["gpus"]),
        gpu_note=next((s.gpu_note for s in nodes.values() if s.gpu_note), local.gpu_note),
        sync=tuple(parts["sync"]),
        output=tuple(output),
        output_total=local.output_total + sum(s.output_total for s in nodes.values()),
        unclosed_at=tuple((n, p) for n, s in nodes.items() for p in s.unclosed),
        notes=tuple(notes),
        events=events,
        between=tuple(parts["between"]),
        hints=tuple(parts["hints"]),
        probes_stopped=local.probes_stopped
        + tuple((p, f"{n}: {why}") for n, x in nodes.items() for p, why in x.probes_stopped),
        nodes=tuple(rows),
        captures=tuple(sorted((c for s in nodes.values() for c in s.captures), key=lambda c: c.t)),
        stalls=tuple(sorted((*local.stalls, *parts["stalls"]), key=lambda s: s.t)),
    )


def _meta(m: Meta, metas: list[Meta]) -> Meta:
    """The collector's header over its nodes: running while any node's job runs; ended,
    with the worst exit code, once every node's job has ended."""
    ended = bool(metas) and all(x.ended for x in metas)
    codes = [x.exit_code for x in metas]
    known = ended and all(c is not None for c in codes)
    running = [x.job_pid for x in metas if x.job_pid is not None and not x.ended]
    return replace(
        m,
        job_pid=running[0] if running else next((x.job_pid for x in metas if x.job_pid), None),
        ended=ended,
        exit_code=max(c for c in codes if c is not None) if known else None,
        exit_t=max((x.exit_t for x in metas if x.exit_t is not None), default=None)
        if ended
        else None,
        dropped_events=m.dropped_events + sum(x.dropped_events for x in metas),
        rejected_frames=m.rejected_frames + sum(x.rejected_frames for x in metas),
    )
