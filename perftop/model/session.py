"""The session model: applies events, hands out immutable snapshots. No Textual, no I/O.

The model is a set of reducers, each owning some event types and some parts of the
snapshot, so new event families (probes, sync sites) plug in without touching the others.
Not thread-safe by design: one ingest thread owns a session.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from perftop.events import (
    Between,
    Dropped,
    Event,
    Hello,
    HookClose,
    JobExit,
    JobStart,
    LoaderInfo,
    MonitorStats,
    Note,
    ObserverStart,
    Output,
    SessionStart,
    Step,
    StepGpu,
    SyncBatch,
)
from perftop.model.between import OVERLAPPED, BetweenReducer
from perftop.model.capture import CaptureReducer
from perftop.model.comm import CommReducer
from perftop.model.probe_health import ProbeHealthReducer
from perftop.model.protocol import Hinter, NoHints
from perftop.model.resources import GpusReducer, HostReducer, ProcessesReducer
from perftop.model.roles import assign_roles
from perftop.model.snapshot import Loader, Meta, NoteRow, OutputLine, Snapshot, StepStats, Trainer
from perftop.model.stacks import StacksReducer
from perftop.model.steps import LIVE_WINDOW, StepSeries
from perftop.model.sync import SyncReducer
from perftop.model.terminal import terminal_lines
from perftop.model.trainers import primary
from perftop.model.workers import WorkersReducer
from perftop.wire import DATA_WAIT_NOTE, DATA_WAIT_NOTE_V1, StepBatch, StepRecord, steps_of

OUTPUT_LINES = 2000
MAX_STARTS = 64  # a loader's iterator starts kept (each epoch makes one)


class Reducer(Protocol):
    @property
    def handles(self) -> tuple[type[Event], ...]:
        """The event types this reducer folds in (a read-only view for the checker)."""

    def apply(self, ev: Any) -> None: ...

    def contribute(self, parts: dict[str, Any], window: int | None) -> None: ...


class MetaReducer:
    handles = (SessionStart, JobStart, JobExit, Dropped, MonitorStats, ObserverStart, Note)

    def __init__(self) -> None:
        self.meta = Meta()
        self._dropped: dict[tuple[int, str], int] = {}

    def apply(self, ev: Any) -> None:
        m = self.meta
        if isinstance(ev, SessionStart):
            self.meta = _replace(
                m,
                command=ev.command,
                cwd=ev.cwd,
                host=ev.host,
                start_t=ev.t,
                record_path=ev.record_path,
                perftop_version=ev.perftop_version,
            )
        elif isinstance(ev, JobStart):
            self.meta = _replace(m, job_pid=ev.pid, start_t=m.start_t or ev.t)
        elif isinstance(ev, JobExit):
            code = ev.exit_code if ev.known else m.exit_code
            self.meta = _replace(m, exit_code=code, exit_t=ev.t, ended=True)
        elif isinstance(ev, Dropped):
            self._dropped[(ev.pid, ev.source)] = ev.total
            self.meta = _replace(m, dropped_events=sum(self._dropped.values()))
        elif isinstance(ev, MonitorStats):
            self.meta = _replace(
                m,
                monitor_cpu_percent=ev.cpu_percent,
                monitor_rss_bytes=ev.rss_bytes,
                rejected_frames=ev.rejected_frames,
                monitor_dropped=ev.dropped,
            )
        elif isinstance(ev, ObserverStart):
            self.meta = _replace(m, observer=True, observer_python=ev.python)
        elif isinstance(ev, Note) and ev.source == "recording" and ev.level == "error":
            self.meta = _replace(m, record_path="")  # the recording stopped (a full disk)

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        parts["meta"] = self.meta


class StepsReducer:
    handles = (Hello, Step, StepGpu, LoaderInfo, Between, SyncBatch, Note, HookClose)

    def __init__(self) -> None:
        self.series: dict[int, StepSeries] = {}
        self.syncs: dict[int, int] = {}  # sync events per process, for the ranks table
        self.trainers: dict[int, Trainer] = {}
        self.loaders: dict[tuple[int, int], Loader] = {}
        # worker pid -> its loader's id, for every iterator's workers: a loader's report
        # names only its newest workers (each epoch's iterator replaces the last)
        self.worker_loader: dict[int, int] = {}
        self.before_forward: set[int] = set()  # processes whose data wait is a feeder's
        self.closing: set[int] = set()  # hooks that end with a HookClose (Hello.closes)
        self.closed: set[int] = set()  # ... and those whose HookClose came

    def apply(self, ev: Any) -> None:
        if isinstance(ev, Step):
            s = self.series.get(ev.pid)
            if s is None:
                s = self.series[ev.pid] = StepSeries(ev.pid)
            s.add(ev)
        elif isinstance(ev, Between):  # the next step of that process comes after it
            s = self.series.get(ev.pid)
            if s is not None and ev.kind != OVERLAPPED:  # an async save cuts no step
                s.gap_kind = ev.kind
        elif isinstance(ev, SyncBatch):
            if ev.sites:
                self.syncs[ev.pid] = self.syncs.get(ev.pid, 0) + sum(x[5] for x in ev.sites)
        elif isinstance(ev, StepGpu):
            s = self.series.get(ev.pid)
            if s is not None:
                s.add_gpu(ev)
        elif isinstance(ev, HookClose):
            self.closed.add(ev.pid)
        elif isinstance(ev, Hello) and ev.worker_id is None:  # workers are not trainers
            if ev.closes:
                self.closing.add(ev.pid)
            self.trainers[ev.pid] = Trainer(
                ev.pid,
                ev.ppid,
                ev.host,
                ev.argv,
                ev.rank,
                ev.local_rank,
                ev.world_size,
                ev.device,
                ev.torch_version,
                ev.torch_threads,
            )
        elif isinstance(ev, Note):
            if ev.text in (DATA_WAIT_NOTE, DATA_WAIT_NOTE_V1) and ev.source.startswith("hook:"):
                self.before_forward.add(int(ev.source[5:]))
        elif isinstance(ev, LoaderInfo):
            for _worker_id, pid in ev.workers:
                self.worker_loader[pid] = ev.loader_id
            key = (ev.pid, ev.loader_id)
            prev = self.loaders.get(key)
            starts = (prev.starts + (ev.t,))[-MAX_STARTS:] if prev is not None else (ev.t,)
            self.loaders[key] = Loader(
                ev.pid,
                ev.loader_id,
                ev.num_workers,
                ev.batch_size,
                ev.pin_memory,
                ev.prefetch_factor,
                ev.persistent_workers,
                ev.workers,
                ev.dataset,
                ev.t,
                start_method=ev.start_method,
                starts=starts,
                grad=ev.grad,
            )

    def apply_steps(self, records: Sequence[StepRecord]) -> None:
        """Packed step records, in order: as :meth:`apply` of each one's :class:`Step`."""
        series = self.series
        by_pid: dict[int, list[StepRecord]] = {}
        if records and all(r[0] == records[0][0] for r in records):  # one process's frame
            by_pid[records[0][0]] = list(records)
        else:
            for r in records:
                by_pid.setdefault(r[0], []).append(r)
        for pid, recs in by_pid.items():
            s = series.get(pid)
            if s is None:
                s = series[pid] = StepSeries(pid)
            s.add_records(recs)

    def _source(self, s: StepStats) -> StepStats:
        """Says how a process's data wait was measured, where there is one (before the
        first forward: even where the run's figure is N/A, its steps' figures are that)."""
        if s.pid in self.before_forward:
            return replace(s, data_wait_source="before_forward")
        if s.data_wait_fraction is None:
            return s
        if any(pid == s.pid for pid, _ in self.loaders):
            return replace(s, data_wait_source="dataloader")
        return s

    def primary_pid(self) -> int | None:
        """The process the step figures are of (:func:`perftop.model.trainers.primary`)."""
        spans = [(p, self.rank_of(p), s.first_t0, s.last_t1) for p, s in self.series.items()]
        return primary(spans, self.closed)

    def rank_of(self, pid: int) -> int | None:
        t = self.trainers.get(pid)
        return t.rank if t is not None else None

    def _host(self, pid: int) -> str:
        t = self.trainers.get(pid)
        return t.host if t is not None else ""

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        ranks = [
            self._source(
                s.stats(self.rank_of(pid), window, self._host(pid), self.syncs.get(pid, 0))
            )
            for pid, s in self.series.items()
        ]
        # Lowest rank first; processes without a rank in order of their first step.
        ranks.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0))
        parts["ranks"] = tuple(ranks)
        pid = self.primary_pid()
        if pid is not None:
            parts["steps"] = next(r for r in ranks if r.pid == pid)
        parts["trainers"] = tuple(self.trainers.values())
        parts["unclosed"] = tuple(
            sorted(p for p in self.series if p in self.closing and p not in self.closed)
        )
        parts["closed"] = tuple(sorted(self.closed))
        parts["loaders"] = tuple(self.loaders.values())
        parts["worker_loader"] = dict(self.worker_loader)


class LogReducer:
    handles = (Output, Note)

    def __init__(self) -> None:
        self.output: deque[OutputLine] = deque(maxlen=OUTPUT_LINES)
        self.output_total = 0
        self.notes: list[NoteRow] = []

    def apply(self, ev: Any) -> None:
        if isinstance(ev, Output):
            for line in terminal_lines(ev.text):
                self.output.append(OutputLine(ev.t, ev.stream, line))
                self.output_total += 1
        else:
            row = NoteRow(ev.t, ev.level, ev.source, ev.text)
            if row not in self.notes[-50:]:
                self.notes.append(row)

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        parts["output"] = tuple(self.output)
        parts["output_total"] = self.output_total
        parts["notes"] = tuple(self.notes)


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
        parts["meta"] = _replace(meta, now_t=now if now is not None else self.last_t)
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


_replace = replace
