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
from perftop.events.stacks import MIN_STALL_S
from perftop.model import Snapshot
from perftop.monitor import stacks
from perftop.probes.procread import held_state

STOPPED = ("stopped", "tracing-stop")  # read as they stand: py-spy cannot pause them

FACTOR = 5.0  # a step stalls when it has run this many times the median ...
# ... and at least MIN_STALL_S long (events/stacks.py: the model places a stall by it)
MIN_STEPS = 5  # a median needs a few steps behind it
# An evaluation or checkpoint in progress is no stalled step. It hangs when it has run this
# many times as long as that kind's earlier ones took on average (at least MIN_STALL_S), or
# HANG_FIRST_S when it is the first of its kind.
HANG_FIRST_S = 120.0
DUMP_ROLES = ("main", "rank", "worker")


class StallWatch:
    """``StallWatch(root_pid, hub.submit)``, appended to ``hub.snapshot_subscribers``."""

    background_ok = True  # keeps working after the TUI left (see lifecycle.detach)

    def __init__(self, root_pid: int, submit: Callable[..., None]) -> None:
        self.root = root_pid
        self.submit = submit
        self._seen: set[tuple[int, int] | tuple[int, int, str]] = set()
        self._seen_hangs: set[tuple[str, int, str]] = set()  # (pg, seq, "collective")
        self._dumped: dict[int, float] = {}  # pid -> when its last stalled step was dumped
        self._busy = threading.Lock()
        self.captures = 0

    def __call__(self, snap: Snapshot) -> None:
        now = snap.meta.now_t
        if now is None or snap.meta.ended:
            return
        stalled = []  # (how long, pid, rank stats, during) of every rank stuck anew
        latest = {pid: (kind, t0, t1) for pid, kind, t0, t1 in snap.between_latest}
        closed = set(snap.closed)
        for r in snap.ranks:
            if r.count < MIN_STEPS or r.p50 is None or not r.recent or r.pid is None:
                continue
            if r.pid in closed:
                continue  # its training ended (its hook said so): idle, no step runs
            last = r.recent[-1]
            since, during = last.t1, ""
            gap = latest.get(r.pid)
            if gap is not None and gap[1] >= last.t1 - 1e-3:  # since its last step
                if gap[2] is None:  # running: a hang only far past its kind's usual length
                    during, since = gap[0], gap[1]
                    if now - since >= _hang_after(snap, r.pid, during):
                        key: tuple[int, int] | tuple[int, int, str] = (
                            r.pid,
                            last.index + 1,
                            during,
                        )
                        if key not in self._seen:
                            stalled.append((now - since, r.pid, r, during))
                    continue
                since = max(since, gap[2])  # the next step began when it ended
            if (r.pid, last.index + 1) in self._seen:
                continue
            if self._dumped.get(r.pid, -1.0) >= since:
                # dumped already: the steps since came late (a stopped process, or one whose
                # interpreter a C call held, sends its steps when it runs again), one stall
                continue
            if now - since >= max(FACTOR * r.p50, MIN_STALL_S):
                stalled.append((now - since, r.pid, r, during))
        if not stalled:
            self._hang(snap, now)
            return
        if not self._busy.acquire(blocking=False):
            return
        # One dump covers every process: ranks stalled together (a hung collective) make
        # one capture, named after the longest-stalled rank.
        for _, pid, r, during in stalled:
            step = r.recent[-1].index + 1
            self._seen.add((pid, step, during) if during else (pid, step))
            if not during:
                self._dumped[pid] = now
        stuck, pid, r, during = max(stalled, key=lambda x: x[0])
        last = r.recent[-1]
        typical = _typical(snap, pid, during) if during else r.p50
        pids = [(pid, _role(snap, pid))]
        pids += [(p.pid, p.role) for p in snap.roles if p.role in DUMP_ROLES and p.pid != pid]
        threading.Thread(
            target=self._capture,
            args=(
                pid,
                last.index + 1,
                now - stuck,
                typical or 0.0,
                pids,
                during,
                snap.train_threads(),
            ),
            name="perftop-stall",
            daemon=True,
        ).start()

    def _hang(self, snap: Snapshot, now: float) -> None:
        """A collective that hangs (``snap.comm.hangs``): every process's stacks, once per
        collective, so the hang names where each rank that never entered it stands."""
        for h in snap.comm.hangs:
            key = (h.pg, h.seq, "collective")
            if not h.ongoing or h.desync or key in self._seen_hangs:
                continue
            waiting = next((r.pid for r in h.ranks if r.entered), None)
            if waiting is None or not self._busy.acquire(blocking=False):
                return
            self._seen_hangs.add(key)
            last = next(
                (r.recent[-1].index for r in snap.ranks if r.pid == waiting and r.recent), -1
            )
            pids = [(waiting, _role(snap, waiting))]
            pids += [
                (p.pid, p.role) for p in snap.roles if p.role in DUMP_ROLES and p.pid != waiting
            ]
            threading.Thread(
                target=self._capture,
                args=(
                    waiting,
                    last + 1,
                    h.t_created,
                    h.threshold_s,
                    pids,
                    "collective",
                    snap.train_threads(),
                ),  # fmt: skip
                name="perftop-stall",
                daemon=True,
            ).start()
            return

    def _capture(
        self,
        pid: int,
        step: int,
        since: float,
        median: float,
        pids: list[tuple[int, str]],
        during: str = "",
        threads: dict[int, int] | None = None,
    ) -> None:
        """Each process's stacks (its training thread's where ``threads`` names one)."""
        threads = threads or {}
        try:
            t_dump = time.time()  # the stalled process first: its stacks are read from here
            got: list[Any] = []
            why: list[str] = []
            # A permission problem or no py-spy is worth recording: it says how to fix it
            # (a hang or stall with no reason for its missing stacks says nothing).
            refused = stacks.pyspy() is None
            states: list[tuple[int, str]] = []
            for p, role in pids:
                if not stacks.in_job(self.root, p):
                    continue  # never dump a process outside the job
                state = held_state(p)
                if state:
                    states.append((p, state))
                try:
                    dump = _dump(p, state)
                    frames, _name, _idle = stacks.pick_thread(p, dump, threads.get(p))
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
                StallCapture(
                    t,
                    pid,
                    step,
                    round(t - since, 3),
                    median,
                    tuple(got),
                    "; ".join(why),
                    during,
                    round(t - t_dump, 3),
                    tuple(states),
                )  # fmt: skip
            )
        finally:
            self._busy.release()


def _typical(snap: Snapshot, pid: int, kind: str) -> float | None:
    """The mean length of the earlier intervals of ``kind`` (the primary process's), or
    None where there were none."""
    if snap.steps.pid != pid:
        return None
    row = next((b for b in snap.between if b.kind == kind and b.count), None)
    return row.total_s / row.count if row is not None else None


def _hang_after(snap: Snapshot, pid: int, kind: str) -> float:
    typical = _typical(snap, pid, kind)
    return HANG_FIRST_S if typical is None else max(FACTOR * typical, MIN_STALL_S)


def _dump(pid: int, state: str) -> list[Any]:
    """``pid``'s stacks, paused for a consistent read where py-spy can pause it. A stopped
    process stands still: read as it is, it is read exactly. One a tracer holds (strace, a
    debugger) py-spy cannot pause (the kernel refuses a second tracer): read as it runs."""
    if state in STOPPED:
        return stacks.dump(pid)
    try:
        return stacks.dump(pid, blocking=True)
    except stacks.StackError as exc:
        if exc.permission and not stacks.traced(pid):
            raise
        return stacks.dump(pid)  # (a tracer holds it, or it stopped since its state was read)


def _role(snap: Snapshot, pid: int) -> str:
    r = snap.role_of(pid)
    return r.role if r is not None else "main"
