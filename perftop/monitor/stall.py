"""Stall capture: when a step has run far longer than usual, dump every process's stacks
while it is still stuck, once per stall, and record them as a ``StallCapture`` event.

A snapshot subscriber of the hub: it only looks at the snapshot and, when a step is
stalled, hands the dumping to a thread, so the hub never waits for py-spy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from perftop.events import StallCapture
from perftop.model import Snapshot
from perftop.monitor import stacks

FACTOR = 5.0  # a step stalls when it has run this many times the median ...
MIN_STALL_S = 2.0  # ... and at least this long
MIN_STEPS = 5  # a median needs a few steps behind it
DUMP_ROLES = ("main", "rank", "worker")


class StallWatch:
    """``StallWatch(root_pid, hub.submit)``, appended to ``hub.snapshot_subscribers``."""

    background_ok = True  # keeps working after the TUI left (see lifecycle.detach)

    def __init__(self, root_pid: int, submit: Callable[..., None]) -> None:
        self.root = root_pid
        self.submit = submit
        self._seen: set[tuple[int, int]] = set()
        self._busy = threading.Lock()
        self.captures = 0

    def __call__(self, snap: Snapshot) -> None:
        now = snap.meta.now_t
        if now is None or snap.meta.ended:
            return
        stalled = []  # (how long, pid, rank stats) of every rank stuck in a new stall
        for r in snap.ranks:
            if r.count < MIN_STEPS or r.p50 is None or not r.recent or r.pid is None:
                continue
            last = r.recent[-1]
            if (r.pid, last.index + 1) in self._seen:
                continue
            if now - last.t1 >= max(FACTOR * r.p50, MIN_STALL_S):
                stalled.append((now - last.t1, r.pid, r))
        if not stalled or not self._busy.acquire(blocking=False):
            return
        # One dump covers every process: ranks stalled together (a hung collective) make
        # one capture, named after the longest-stalled rank.
        for _, pid, r in stalled:
            self._seen.add((pid, r.recent[-1].index + 1))
        _, pid, r = max(stalled, key=lambda x: x[0])
        last = r.recent[-1]
        pids = [(pid, _role(snap, pid))]
        pids += [(p.pid, p.role) for p in snap.roles if p.role in DUMP_ROLES and p.pid != pid]
        threading.Thread(
            target=self._capture,
            args=(pid, last.index + 1, last.t1, r.p50, pids),
            name="perftop-stall",
            daemon=True,
        ).start()

    def _capture(
        self, pid: int, step: int, since: float, median: float, pids: list[tuple[int, str]]
    ) -> None:
        try:
            got: list[Any] = []
            why: list[str] = []
            refused = False  # a permission problem is worth recording: it says how to fix it
            for p, role in pids:
                if not stacks.in_job(self.root, p):
                    continue  # never dump a process outside the job
                try:
                    frames, _name, _idle = stacks.main_thread(p, stacks.dump(p, blocking=True))
                except stacks.StackError as exc:
                    text = stacks.permission_advice(p) if exc.permission else str(exc)
                    refused = refused or exc.permission
                    if text not in why:
                        why.append(text)
                    continue
                got.append((p, role, frames))
            if not refused and not any(p == pid and frames for p, _role, frames in got):
                return  # no Python frame: the interpreter is starting or exiting, not a step
            t = time.time()
            self.captures += 1
            self.submit(
                StallCapture(t, pid, step, round(t - since, 3), median, tuple(got), "; ".join(why))
            )
        finally:
            self._busy.release()


def _role(snap: Snapshot, pid: int) -> str:
    r = snap.role_of(pid)
    return r.role if r is not None else "main"
