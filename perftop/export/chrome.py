"""A recording as a Chrome trace (``chrome://tracing``, Perfetto): one track per process.

Each process is named for what it is (``main``, ``rank N``, ``DataLoader worker N``, or
its program name), with the node in a fleet recording: the same pid on two nodes gets two
tracks (trace pids past ``NODE_PID_BASE`` per node). Counter events (``ph: C``) chart each
process's CPU and memory, the host's CPU and memory, each GPU's use and memory, the data
wait of each step and each DataLoader worker's batches (:mod:`perftop.export.counters`).

Each step is a complete event (``ph: X``) on its process, with its phases as nested
complete events laid end to end in the order a step runs them (data wait, forward and the
rest, backward, optimizer): the recording holds each phase's duration, not where inside
the step it ran. Gaps of at least ``GAP_MIN_S`` between two steps of a process are
"between steps" events; each interval outside the steps (an evaluation, a rollout, a
checkpoint: the recording's ``Between``) is a complete event named by its kind, on a thread
of its process's track for that kind (an evaluation and a checkpoint in one interval may
overlap: each is its kind's own time, not where inside the interval it ran); host-device syncs are instant events (``ph: i``) at the end of
their step; notes are global instant events; collectives, their waits and stall captures
are :mod:`perftop.export.comm_trace`'s. Timestamps are microseconds since the
session start. The file is written as it is read, so a week of steps needs no memory.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

from perftop.events import (
    Between,
    CaptureOps,
    CollBatch,
    CollWaiting,
    GpuSample,
    Hello,
    HostSample,
    LoaderInfo,
    NodeScope,
    Note,
    ProcSample,
    SessionStart,
    StallCapture,
    Step,
    SyncBatch,
    WorkerStats,
)
from perftop.export import counters
from perftop.export.capture_trace import TraceError, shifted_events
from perftop.export.coll_match import group_sizes
from perftop.export.comm_trace import CommTrack
from perftop.export.names import NAME_PID, NAME_ROLE
from perftop.export.output import OutFile, outputs
from perftop.export.steptrack import step_events
from perftop.recording import ReadStats, read_events
from perftop.replay.index import GAP_MIN_S

RECENT = 4096  # steps per process remembered to place their sync events
NODE_PID_BASE = 10_000_000  # node i's pid P is track (i + 1) * NODE_PID_BASE + P
# The thread of each kind of interval between steps on its process's track: above any
# Linux thread id (at most 2**22), so no real thread of a capture's trace meets them.
KIND_TIDS = {"eval": 1, "rollout": 2, "checkpoint": 3, "checkpoint_overlapped": 4, "report": 5}
KIND_TID_BASE = 1 << 30


class ChromeTrace:
    def __init__(self, out: OutFile) -> None:
        self.out = out
        self.start: float | None = None
        self.first = True
        self.node = ""  # the node whose events these are ("": the local job)
        self.nodes: dict[str, int] = {}
        self.names: dict[int, tuple[int, str]] = {}  # trace pid -> (sureness, name)
        self.last_t1: dict[int, float] = {}
        self.threads: set[tuple[int, int, str]] = set()  # (trace pid, tid, its name)
        self.kind_tids = dict(KIND_TIDS)  # a kind another perftop wrote gets one of its own
        self.recent: dict[int, OrderedDict[int, float]] = {}
        self.count = 0

    def emit(self, ev: dict[str, Any]) -> None:
        self.out.write(("\n" if self.first else ",\n") + json.dumps(ev, separators=(",", ":")))
        self.first = False
        self.count += 1

    def us(self, t: float) -> float:
        return round((t - (self.start or 0.0)) * 1e6, 3)

    def track(self, pid: int) -> int:
        """The trace pid of ``pid`` on the current node."""
        if not self.node:
            return pid
        i = self.nodes.setdefault(self.node, len(self.nodes))
        return (i + 1) * NODE_PID_BASE + pid

    def name(self, pid: int, label: str, sure: int = NAME_PID, latest: bool = False) -> None:
        """Name the current node's ``pid``: ``label (pid N)``, `` @ node`` in a fleet;
        ``latest``: over a name as sure as this one."""
        tp = self.track(pid)
        old = self.names.get(tp)
        if old is None or sure > old[0] or (latest and sure == old[0]):
            where = f" @ {self.node}" if self.node else ""
            own = f" (pid {pid})" if pid else ""  # pid 0: the host track
            self.names[tp] = (sure, f"{label}{own}{where}")

    def finish(self) -> None:
        """Every track's name (metadata may stand anywhere in the array)."""
        self.emit({"ph": "M", "name": "process_name", "pid": 0, "tid": 0,
                   "args": {"name": "host, GPUs and notes"}})  # fmt: skip
        for tp, (_, label) in sorted(self.names.items()):
            for kind, args in (("process_name", {"name": label}),
                               ("thread_name", {"name": label.split(" (pid")[0]}),
                               ("process_sort_index", {"sort_index": tp})):  # fmt: skip
                self.emit({"ph": "M", "name": kind, "pid": tp, "tid": tp, "args": args})
        for tp, tid, name in sorted(self.threads):
            self.emit({"ph": "M", "name": "thread_name", "pid": tp, "tid": tid,
                       "args": {"name": name}})  # fmt: skip
            self.emit({"ph": "M", "name": "thread_sort_index", "pid": tp, "tid": tid,
                       "args": {"sort_index": tid}})  # fmt: skip

    def thread(self, track: int, tid: int, name: str) -> None:
        """A thread of its own on ``track`` (named at the end): an interval's kind, the
        collectives."""
        self.threads.add((track, tid, name))

    def between(self, ev: Between) -> None:
        """An interval outside the steps, on its kind's thread of the process's track."""
        pid = self.track(ev.pid)
        tid = KIND_TID_BASE + self.kind_tids.setdefault(ev.kind, len(self.kind_tids) + 1)
        self.thread(pid, tid, f"between steps: {ev.kind}")
        args: dict[str, Any] = {}
        if ev.site:
            args["site"] = ev.site
        if ev.forward_s >= 0.0:
            args["forward_s"] = ev.forward_s
        self.emit(
            {
                "ph": "X",
                "name": ev.kind,
                "cat": "between",
                "pid": pid,
                "tid": tid,
                "ts": self.us(ev.t0),
                "dur": round(max(0.0, ev.length) * 1e6, 3),  # (another writer's recording)
                "args": args,
            }
        )

    def step(self, ev: Step) -> None:
        self.name(ev.pid, "trainer")
        pid = self.track(ev.pid)
        dur = ev.t1 - ev.t0
        prev = self.last_t1.get(pid)
        if prev is not None and ev.t0 - prev >= GAP_MIN_S:
            self.emit(
                {
                    "ph": "X",
                    "name": "between steps",
                    "cat": "between",
                    "pid": pid,
                    "tid": pid,
                    "ts": self.us(prev),
                    "dur": round((ev.t0 - prev) * 1e6, 3),
                }
            )
        self.last_t1[pid] = ev.t1
        for item in step_events(ev, pid, self.us):
            self.emit(item)
        if dur > 0:
            self.counter(pid, ev.t1, "data wait %", {"data wait %": round(ev.data / dur * 100, 1)})
        recent = self.recent.setdefault(pid, OrderedDict())
        recent[ev.index] = ev.t1
        if len(recent) > RECENT:
            recent.popitem(last=False)

    def counter(self, pid: int, t: float, name: str, args: dict[str, float]) -> None:
        """A counter event: each key of ``args`` is a series on the track ``name``."""
        self.emit({"ph": "C", "name": name, "pid": pid, "ts": self.us(t), "args": args})

    def sync(self, ev: SyncBatch) -> None:
        pid = self.track(ev.pid)
        steps = self.recent.get(pid)
        t = steps.get(ev.step) if steps is not None else None
        if t is None:
            return
        for op, file, line, function, kind, count, *rest in ev.sites:
            blocked = rest[0] if rest else None
            lib = dict(zip(("lib_file", "lib_line", "lib_function", "package"), rest[1:5]))
            self.emit(
                {
                    "ph": "i",
                    "s": "t",
                    "name": f"{kind}: {op}",
                    "cat": "sync",
                    "pid": pid,
                    "tid": pid,
                    "ts": self.us(t),
                    "args": {
                        "file": file,
                        "line": line,
                        "function": function,
                        "count": count,
                        "blocked_s": blocked,
                        "step": ev.step,
                        **lib,  # a sync made inside a library: that library's line
                    },
                }
            )

    def capture(self, ev: CaptureOps, recording: Path) -> None:
        """A capture's full trace, shifted onto this trace's clock (a trace that moved
        with its recording is looked for beside it; one that is gone is a note)."""
        path = Path(ev.trace)
        if not path.exists() and (recording.parent / path.name).exists():
            path = recording.parent / path.name
        track = self.track(ev.pid)
        try:
            for e in shifted_events(path, ev.pid, track, ev.clock_offset_us, self.start or 0.0):
                self.emit(e)
        except TraceError as exc:
            self.note(ev.t, f"capture {ev.capture_id}: {exc}", "warning", "capture")

    def note(self, t: float, text: str, level: str, source: str) -> None:
        self.emit(
            {
                "ph": "i",
                "s": "g",
                "name": text[:80],
                "cat": "note",
                "pid": 0,
                "tid": 0,
                "ts": self.us(t),
                "args": {"level": level, "source": source},
            }
        )


def export_chrome(path: str | Path, out_path: str | Path, stats: ReadStats) -> int:
    """Write the trace; returns how many trace events it holds."""
    with outputs([Path(out_path)]) as (out,):
        out.write('{"displayTimeUnit":"ms","traceEvents":[')
        tr = ChromeTrace(out)
        comm = CommTrack(tr, group_sizes(path))
        command: list[str] = []
        for ev in read_events(path, stats):
            if isinstance(ev, Step):
                tr.step(ev)
            elif isinstance(ev, SyncBatch):
                tr.sync(ev)
            elif isinstance(ev, Between):
                tr.between(ev)
            elif isinstance(ev, SessionStart) and tr.start is None:
                tr.start, command = ev.t, list(ev.command)
            elif isinstance(ev, NodeScope):
                tr.node = ev.node
            elif isinstance(ev, Hello):
                if ev.worker_id is not None:
                    label = f"DataLoader worker {ev.worker_id}"
                else:
                    label = f"rank {ev.rank}" if ev.rank is not None else "main"
                tr.name(ev.pid, label, NAME_ROLE, latest=True)  # a rank greets again
            elif isinstance(ev, LoaderInfo):
                for worker_id, pid in ev.workers:
                    tr.name(pid, f"DataLoader worker {worker_id}", NAME_ROLE)
            elif isinstance(ev, ProcSample):
                counters.processes(tr, ev)
            elif isinstance(ev, HostSample):
                counters.host(tr, ev)
            elif isinstance(ev, GpuSample):
                counters.gpus(tr, ev)
            elif isinstance(ev, WorkerStats):
                tr.name(ev.pid, f"DataLoader worker {ev.worker_id}", NAME_ROLE)
                tr.counter(tr.track(ev.pid), ev.t, "batches", {"batches": ev.batches})
            elif isinstance(ev, Note):
                tr.note(ev.t, ev.text, ev.level, ev.source)
            elif isinstance(ev, CaptureOps) and ev.trace:
                tr.capture(ev, Path(path))
            elif isinstance(ev, CollBatch):
                comm.batch(ev)
            elif isinstance(ev, CollWaiting):
                comm.waiting(ev)
            elif isinstance(ev, StallCapture):
                comm.stall(ev)
        comm.finish()
        tr.finish()
        other = {"command": command, "start_t": tr.start, "recording": str(path)}
        out.write('\n],"otherData":' + json.dumps(other) + "}\n")
    return tr.count
