"""The reducers of the job itself, apart from the session that routes events to them.

Its metadata (command, exit, drops), its training processes' steps and loaders, and its
output and notes: the parts every snapshot has, whatever probes or event families a session
adds (:func:`perftop.model.session.default_reducers` puts them in every session).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from perftop.events import (
    Between,
    Dropped,
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
    TrainThread,
)
from perftop.model.between import OVERLAPPED
from perftop.model.snapshot import Loader, Meta, NoteRow, OutputLine, StepStats, Trainer
from perftop.model.step_stats import step_stats
from perftop.model.steps import StepSeries
from perftop.model.terminal import terminal_lines
from perftop.model.trainers import primary
from perftop.wire import DATA_WAIT_NOTE, DATA_WAIT_NOTE_V1, StepRecord

OUTPUT_LINES = 2000
MAX_STARTS = 64  # a loader's iterator starts kept (each epoch makes one)


class MetaReducer:
    handles = (SessionStart, JobStart, JobExit, Dropped, MonitorStats, ObserverStart, Note)

    def __init__(self) -> None:
        self.meta = Meta()
        self._dropped: dict[tuple[int, str], int] = {}
        self._cpu = [0.0, 0]  # perftop's own CPU readings: their sum and count

    def apply(self, ev: Any) -> None:
        m = self.meta
        if isinstance(ev, SessionStart):
            self.meta = replace(
                m,
                command=ev.command,
                cwd=ev.cwd,
                host=ev.host,
                start_t=ev.t,
                record_path=ev.record_path,
                perftop_version=ev.perftop_version,
                output_to=ev.output,
            )
        elif isinstance(ev, JobStart):
            self.meta = replace(m, job_pid=ev.pid, start_t=m.start_t or ev.t)
        elif isinstance(ev, JobExit):
            code = ev.exit_code if ev.known else m.exit_code
            sig = ev.signal if ev.known else m.exit_signal
            self.meta = replace(m, exit_code=code, exit_signal=sig, exit_t=ev.t, ended=True)
        elif isinstance(ev, Dropped):
            self._dropped[(ev.pid, ev.source)] = ev.total
            self.meta = replace(m, dropped_events=sum(self._dropped.values()))
        elif isinstance(ev, MonitorStats):
            self._cpu[0] += ev.cpu_percent
            self._cpu[1] += 1
            self.meta = replace(
                m,
                monitor_cpu_percent=ev.cpu_percent,
                monitor_cpu_avg=round(self._cpu[0] / self._cpu[1], 1),
                monitor_rss_bytes=ev.rss_bytes,
                rejected_frames=ev.rejected_frames,
                monitor_dropped=ev.dropped,
            )
        elif isinstance(ev, ObserverStart):
            self.meta = replace(m, observer=True, observer_python=ev.python)
        elif isinstance(ev, Note) and ev.source == "recording" and ev.level == "error":
            self.meta = replace(m, record_path="")  # the recording stopped (a full disk)

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        parts["meta"] = self.meta


MAX_UNPLACED = 8  # a process's latest loaders that an interval's end may yet place


class StepsReducer:
    handles = (Hello, Step, StepGpu, LoaderInfo, Between, SyncBatch, Note, HookClose, TrainThread)

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
        # each process's latest loaders not yet known to have started in an interval outside
        # the steps: a later Between may say they did (the hook sends it once the steps go on,
        # and an interval in another, a checkpoint in an evaluation, comes first)
        self.unplaced: dict[int, list[tuple[tuple[int, int], float]]] = {}
        self.latest_between: dict[int, tuple[str, float, float]] = {}  # pid: kind, t0, t1

    def apply(self, ev: Any) -> None:
        if isinstance(ev, Step):
            s = self.series.get(ev.pid)
            if s is None:
                s = self.series[ev.pid] = StepSeries(ev.pid)
            s.add(ev)
        elif isinstance(ev, Between):  # the next step of that process comes after it
            s = self.series.get(ev.pid)
            if ev.kind != OVERLAPPED:  # an async save cuts no step
                if s is not None:
                    s.gap_kind = ev.kind
                self._loaders_in(ev.pid, ev.kind, ev.t0, ev.t0 + ev.length)
        elif isinstance(ev, SyncBatch):
            if ev.sites:
                self.syncs[ev.pid] = self.syncs.get(ev.pid, 0) + sum(x[5] for x in ev.sites)
        elif isinstance(ev, StepGpu):
            s = self.series.get(ev.pid)
            if s is not None:
                s.add_gpu(ev)
        elif isinstance(ev, HookClose):
            self.closed.add(ev.pid)
        elif isinstance(ev, TrainThread):
            t = self.trainers.get(ev.pid)
            if t is not None:
                self.trainers[ev.pid] = replace(t, train_tid=ev.tid if ev.tid != ev.pid else None)
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
                # a hook that connects again (its monitor's socket came back) says it once
                known.train_tid if (known := self.trainers.get(ev.pid)) is not None else None,
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
                # a loader that fed training stays a training loader where an iterator of
                # it runs with grad off later (the training set's loss after each epoch)
                grad=True if prev is not None and prev.grad else ev.grad,
                during=prev.during if prev is not None else "",
            )
            if prev is None:
                waiting = self.unplaced.setdefault(ev.pid, [])
                waiting.append((key, ev.t))
                del waiting[:-MAX_UNPLACED]
                last = self.latest_between.get(ev.pid)
                if last is not None:  # its interval's end came first
                    self._loaders_in(ev.pid, *last)

    def _loaders_in(self, pid: int, kind: str, t0: float, t1: float) -> None:
        """Loaders of ``pid`` whose first iterator started from ``t0`` to ``t1``, an interval
        of ``kind`` outside the steps, started in it."""
        self.latest_between[pid] = (kind, t0, t1)
        waiting = self.unplaced.get(pid)
        if not waiting:
            return
        for key, t in [(k, t) for k, t in waiting if t0 <= t <= t1]:
            self.loaders[key] = replace(self.loaders[key], during=kind)
            waiting.remove((key, t))

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
                step_stats(s, self.rank_of(pid), window, self._host(pid), self.syncs.get(pid, 0))
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
        parts["unclosed_at"] = tuple(
            sorted(("", p) for p in self.series if p in self.closing and p not in self.closed)
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
