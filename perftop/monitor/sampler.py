"""Low-rate stack sampling of a process tree that has no hook (observer mode).

A source with ``start()`` / ``stop()`` (and ``pause()``): one thread dumps, with py-spy
and without pausing the targets, at most ``per_tick`` of the tree's Python processes per
tick in turn, so the cost stays flat however many workers there are. A refused process, or
one whose dumps fail ``TRIES`` times in a row, gets one note with the reason and is not
tried again; a single failed dump (a worker caught starting up, a dump slowed past its
timeout on a loaded host) is tried again at its next turn.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psutil

from perftop.events import Event, Note, StackSample
from perftop.model.stacks import _WORKER
from perftop.monitor import stacks
from perftop.probes.procread import descendants

INTERVAL_S = 1.0
PER_TICK = 4
TRIES = 3  # dumps failed in a row before a process is given up on


def is_python(pid: int) -> bool:
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            names = (p.name(), *(p.cmdline()[:1]))
    except psutil.Error:
        return False
    return any("python" in n.rsplit("/", 1)[-1] for n in names)


def role_of(root: int, pid: int, frames: tuple) -> str:
    if pid == root:
        return "main"
    if any(f[1].endswith(_WORKER) for f in frames):
        return "worker"
    return "child"


class StackSampler:
    def __init__(
        self,
        root: int,
        submit: Callable[..., None],
        interval_s: float = INTERVAL_S,
        per_tick: int = PER_TICK,
    ) -> None:
        self.root = root
        self.submit = submit
        self.interval_s = interval_s
        self.per_tick = per_tick
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed: set[int] = set()
        self._fails: dict[int, int] = {}  # dumps failed in a row, by pid
        self._turn = 0
        self.samples = 0

    def start(self) -> StackSampler:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="perftop-stacks", daemon=True)
        self._thread.start()
        return self

    def pause(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(stacks.DUMP_TIMEOUT_S + 1)

    stop = pause

    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.tick()
            self._stop.wait(max(0.05, self.interval_s - (time.monotonic() - t0)))

    def tick(self) -> list[Event]:
        pids = [p for p in descendants(self.root) if p not in self._failed and is_python(p)]
        if not pids:
            return []
        n = min(self.per_tick, len(pids))
        start = self._turn % len(pids)
        chosen = (pids[start:] + pids[:start])[:n]
        self._turn += n
        events: list[Event] = []
        for pid in chosen:
            try:
                frames, name, idle = stacks.pick_thread(pid, stacks.dump(pid))
            except stacks.StackError as exc:
                if not psutil.pid_exists(pid):
                    continue
                fails = self._fails[pid] = self._fails.get(pid, 0) + 1
                if fails < TRIES and not exc.permission:
                    continue
                self._failed.add(pid)
                why = stacks.permission_advice(pid) if exc.permission else str(exc)
                events.append(Note(time.time(), "warning", "stacks", f"pid {pid}: {why}"))
                continue
            self._fails.pop(pid, None)
            events.append(
                StackSample(time.time(), pid, role_of(self.root, pid, frames), frames, name, idle)
            )
            self.samples += 1
        if events:
            self.submit(*events)
        return events
