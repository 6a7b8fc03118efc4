"""A recording as a Chrome trace (``chrome://tracing``, Perfetto): one track per process.

Each step is a complete event (``ph: X``) on its process, with its phases as nested
complete events laid end to end in the order a step runs them (data wait, forward and the
rest, backward, optimizer): the recording holds each phase's duration, not where inside
the step it ran. Gaps of at least ``GAP_MIN_S`` between two steps of a process are
"between steps" events; host-device syncs are instant events (``ph: i``) at the end of
their step; notes are global instant events. Timestamps are microseconds since the
session start. The file is written as it is read, so a week of steps needs no memory.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import IO, Any

from perftop.events import Hello, Note, SessionStart, Step, SyncBatch
from perftop.recording import ReadStats, read_events
from perftop.replay.index import GAP_MIN_S

RECENT = 4096  # steps per process remembered to place their sync events


class ChromeTrace:
    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.start: float | None = None
        self.first = True
        self.named: set[int] = set()
        self.last_t1: dict[int, float] = {}
        self.recent: dict[int, OrderedDict[int, float]] = {}
        self.count = 0

    def emit(self, ev: dict[str, Any]) -> None:
        self.out.write(("\n" if self.first else ",\n") + json.dumps(ev, separators=(",", ":")))
        self.first = False
        self.count += 1

    def us(self, t: float) -> float:
        return round((t - (self.start or 0.0)) * 1e6, 3)

    def name(self, pid: int, label: str) -> None:
        if pid not in self.named:
            self.named.add(pid)
            self.emit(
                {"ph": "M", "name": "process_name", "pid": pid, "tid": pid, "args": {"name": label}}
            )

    def step(self, ev: Step) -> None:
        self.name(ev.pid, f"pid {ev.pid}")
        dur = ev.t1 - ev.t0
        prev = self.last_t1.get(ev.pid)
        if prev is not None and ev.t0 - prev >= GAP_MIN_S:
            self.emit(
                {
                    "ph": "X",
                    "name": "between steps",
                    "cat": "between",
                    "pid": ev.pid,
                    "tid": ev.pid,
                    "ts": self.us(prev),
                    "dur": round((ev.t0 - prev) * 1e6, 3),
                }
            )
        self.last_t1[ev.pid] = ev.t1
        args: dict[str, Any] = {"index": ev.index, "source": ev.source}
        if ev.phases:
            args["phases_s"] = ev.phases
        self.emit(
            {
                "ph": "X",
                "name": "step",
                "cat": "step",
                "pid": ev.pid,
                "tid": ev.pid,
                "ts": self.us(ev.t0),
                "dur": round(dur * 1e6, 3),
                "args": args,
            }
        )
        other = max(0.0, dur - ev.data - ev.backward - ev.optimizer)
        t = ev.t0
        for label, d in (
            ("data wait", ev.data),
            ("forward/other", other),
            ("backward", ev.backward),
            ("optimizer", ev.optimizer),
        ):
            if d > 0:
                self.emit(
                    {
                        "ph": "X",
                        "name": label,
                        "cat": "phase",
                        "pid": ev.pid,
                        "tid": ev.pid,
                        "ts": self.us(t),
                        "dur": round(d * 1e6, 3),
                    }
                )
                t += d
        recent = self.recent.setdefault(ev.pid, OrderedDict())
        recent[ev.index] = ev.t1
        if len(recent) > RECENT:
            recent.popitem(last=False)

    def sync(self, ev: SyncBatch) -> None:
        t = self.recent.get(ev.pid, {}).get(ev.step)
        if t is None:
            return
        for op, file, line, function, kind, count, blocked in ev.sites:
            self.emit(
                {
                    "ph": "i",
                    "s": "t",
                    "name": f"{kind}: {op}",
                    "cat": "sync",
                    "pid": ev.pid,
                    "tid": ev.pid,
                    "ts": self.us(t),
                    "args": {
                        "file": file,
                        "line": line,
                        "function": function,
                        "count": count,
                        "blocked_s": blocked,
                        "step": ev.step,
                    },
                }
            )


def export_chrome(path: str | Path, out_path: str | Path, stats: ReadStats) -> int:
    """Write the trace; returns how many trace events it holds."""
    with open(out_path, "w", encoding="utf-8") as out:
        out.write('{"displayTimeUnit":"ms","traceEvents":[')
        tr = ChromeTrace(out)
        command: list[str] = []
        for ev in read_events(path, stats):
            if isinstance(ev, Step):
                tr.step(ev)
            elif isinstance(ev, SyncBatch):
                tr.sync(ev)
            elif isinstance(ev, SessionStart) and tr.start is None:
                tr.start, command = ev.t, list(ev.command)
            elif isinstance(ev, Hello):
                label = f"rank {ev.rank}" if ev.rank is not None else "main"
                tr.name(ev.pid, f"{label} (pid {ev.pid})")
            elif isinstance(ev, Note):
                tr.emit(
                    {
                        "ph": "i",
                        "s": "g",
                        "name": ev.text[:80],
                        "cat": "note",
                        "pid": 0,
                        "tid": 0,
                        "ts": tr.us(ev.t),
                        "args": {"level": ev.level, "source": ev.source},
                    }
                )
        other = {"command": command, "start_t": tr.start, "recording": str(path)}
        out.write('\n],"otherData":' + json.dumps(other) + "}\n")
    return tr.count
