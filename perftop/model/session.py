"""The session model: applies events, hands out immutable snapshots. No Textual, no I/O.

The model is a set of reducers, each owning some event types and some parts of the
snapshot, so new event families (probes, sync sites) plug in without touching the others.
Not thread-safe by design: one ingest thread owns a session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol

from perftop.events import Event, JobExit, Step
from perftop.model.between import BetweenReducer
from perftop.model.capture import CaptureReducer
from perftop.model.comm import CommReducer
from perftop.model.gpu_reducer import GpusReducer
from perftop.model.job_reducers import LogReducer, MetaReducer, StepsReducer
from perftop.model.probe_health import ProbeHealthReducer
from perftop.model.protocol import Hinter, NoHints
from perftop.model.resources import HostReducer, ProcessesReducer
from perftop.model.roles import assign_roles
from perftop.model.snapshot import Meta, Snapshot
from perftop.model.stacks import StacksReducer
from perftop.model.steps import LIVE_WINDOW
from perftop.model.sync import SyncReducer
from perftop.model.workers import WorkersReducer
from perftop.wire import StepBatch, StepRecord, steps_of


class Reducer(Protocol):
    @property
    def handles(self) -> tuple[type[Event], ...]:
        """The event types this reducer folds in (a read-only view for the checker)."""

    def apply(self, ev: Any) -> None: ...

    def contribute(self, parts: dict[str, Any], window: int | None) -> None: ...


def default_reducers() -> list[Reducer]:
    """The reducers every session has (each event family adds its own here)."""
    steps = StepsReducer()
    return [
        MetaReducer(),
        steps,
        BetweenReducer(),  # after StepsReducer: it reads the primary process's pid
        LogReducer(),
        ProcessesReducer(),
        HostReducer(),
        GpusReducer(),
        SyncReducer(),
        ProbeHealthReducer(),
        StacksReducer(),
        WorkersReducer(),
        CaptureReducer(),
        CommReducer(),  # after StepsReducer: it reads the ranks' step medians
    ]


class Session:
    """Applies events in order; :meth:`snapshot` is cheap enough for 2 Hz or more."""

    # The collector's name of the node this session models (FleetSession sets it; a class
    # default, so a session pickled before it existed reads ""): its snapshots' Meta.node.
    node = ""

    def __init__(self, reducers: list[Reducer] | None = None, hints: Hinter | None = None) -> None:
        self.reducers = reducers if reducers is not None else default_reducers()
        self._dispatch, self._batch = self._route()
        self.events = 0
        self.last_t: float | None = None
        # Hints are evaluated on the events' clock, so a replay raises the same ones.
        self.hints: Hinter = hints if hints is not None else NoHints()

    def _route(self) -> tuple[dict[type, list[Any]], list[Callable[[list[StepRecord]], None]]]:
        """Who takes each event type; and who takes a batch of step records: a reducer's
        own ``apply_steps``, or its ``apply`` of each record made a :class:`Step`."""
        out: dict[type, list[Any]] = {}
        batch: list[Callable[[list[StepRecord]], None]] = []
        for r in self.reducers:
            for t in r.handles:
                out.setdefault(t, []).append(r.apply)
            if Step in r.handles:
                batch.append(getattr(r, "apply_steps", None) or _each_step(r.apply))
        return out, batch

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the bound methods of its routing table (a replay checkpoint
        holds plain data only; see :mod:`perftop.replay.checkpoint`)."""
        state = dict(self.__dict__)
        del state["_dispatch"], state["_batch"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._dispatch, self._batch = self._route()

    def apply(self, ev: Event) -> None:
        if type(ev) is StepBatch:
            self._apply_batch(ev)
            return
        self.events += 1
        t = getattr(ev, "t", None)
        if t is None:
            t = getattr(ev, "t1", None)
        for fn in self._dispatch.get(type(ev), ()):
            fn(ev)
        end = type(ev) is JobExit
        if t is not None and (self.last_t is None or t > self.last_t):
            self.last_t = t
            if self.hints.due(t) and not end:
                self.hints.update(self._snapshot(t, LIVE_WINDOW))
        if end:
            # The rules look once more at the job's end, however soon after their last look:
            # the last steps (an epoch's restart, its wait seconds long) were left out of
            # the hints the run ended with where it ended under EVERY_S after that look.
            self.hints.update(self._snapshot(self.last_t, LIVE_WINDOW))

    def _apply_batch(self, batch: StepBatch) -> None:
        """A frame of steps folded whole, to the same state as :meth:`apply` of each step:
        the batch is cut only where the hints fall due, so they see the same steps."""
        records = list(batch.records())
        last, due, start = self.last_t, self.hints.due, 0
        for i, rec in enumerate(records):
            t = rec[3]  # t1, a step's time
            if last is None or t > last:
                last = t
                if due(t):
                    self._fold(records[start : i + 1], t)
                    self.hints.update(self._snapshot(t, LIVE_WINDOW))
                    start = i + 1
        self._fold(records[start:], last)

    def _fold(self, records: list[StepRecord], last_t: float | None) -> None:
        if records:
            self.events += len(records)
            for fn in self._batch:
                fn(records)
        self.last_t = last_t

    def apply_all(self, events: Iterable[Event]) -> None:
        for ev in events:
            self.apply(ev)

    def snapshot(self, *, now: float | None = None, window: int | None = LIVE_WINDOW) -> Snapshot:
        """An immutable view; ``window=None`` computes whole-run figures (for reports). Its
        hints are the hinter's for that view (see :class:`~perftop.model.protocol.Hinter`)."""
        snap = self._snapshot(now, window)
        whole = (lambda: snap) if window is None else (lambda: self._snapshot(None, None))
        return replace(snap, hints=self.hints.hints(snap, window, whole, self.events))

    def _snapshot(self, now: float | None, window: int | None) -> Snapshot:
        parts: dict[str, Any] = {}
        for r in self.reducers:
            r.contribute(parts, window)
        meta = parts.get("meta", Meta())
        parts["meta"] = replace(meta, now_t=now if now is not None else self.last_t, node=self.node)
        parts["roles"] = assign_roles(
            parts["meta"],
            parts.get("trainers", ()),
            parts.get("loaders", ()),
            parts.get("processes", ()),
            parts.pop("observed_roles", None),
            parts.get("workers", ()),
            parts.pop("worker_loader", None),
            parts.pop("gone", None),
        )
        parts["events"] = self.events
        return Snapshot(**parts)


def _each_step(apply: Callable[[Any], None]) -> Callable[[list[StepRecord]], None]:
    """A reducer without ``apply_steps`` gets each record as a :class:`Step`."""

    def each(records: list[StepRecord]) -> None:
        for step in steps_of(records):
            apply(step)

    return each
