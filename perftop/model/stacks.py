"""Stack samples and stall captures in the model: where each process spends its time.

Each sample is reduced to one line of "where": waiting on the DataLoader queue, a
DataLoader worker idle for work, or the innermost frame of the user's own code
(``transforms.py:88 dilate``), with the library call it is in when there is one. Shares are
of the samples taken, so they are measured; with few samples they are coarse, and the
count says so.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perftop.codepath import code_file
from perftop.events import Step
from perftop.events.stacks import (
    MIN_STALL_S,
    StackFrame,
    StackSample,
    StallCapture,
)
from perftop.fmt import step_no
from perftop.model.roles import ROLE_ORDER, as_role
from perftop.model.snapshot import Snapshot, StackRow, StallRow
from perftop.wire import StepRecord

MAX_STALLS = 50
TOP = 5
# perftop's own hook (its pass-throughs on torch's calls: the innermost Python frame of a
# backward) is no line of the user's, wherever perftop is installed (a checkout, not
# site-packages, in development)
_HOOK = str(Path(__file__).absolute().parent.parent / "hook") + "/"
_LIB_MARKS = ("site-packages", "dist-packages", "/lib/python3", "<frozen", "<string>", _HOOK)
_WAIT_FILES = ("queue.py", "queues.py", "threading.py", "connection.py", "selectors.py")
_LOADER = "torch/utils/data/dataloader.py"
_WORKER = "torch/utils/data/_utils/worker.py"


def is_library(path: str) -> bool:
    return any(m in path for m in _LIB_MARKS)


def short(frame: StackFrame) -> str:
    """``train.py:88 dilate``; a library's frame from its package's folder on
    (``ignite/engine/__init__.py:689 evaluate_step``: one file)."""
    fn, path, line = frame
    return f"{code_file(path)}:{line} {fn}"


def where(frames: tuple[StackFrame, ...]) -> str:
    """What one stack (innermost first) was doing, in words a user can act on."""
    if not frames:
        return "no Python frame (native code, or between bytecodes)"
    waiting = frames[0][1].endswith(_WAIT_FILES) or frames[0][0] in ("wait", "get", "poll")
    files = [f[1] for f in frames]
    loop = next((i for i, p in enumerate(files) if p.endswith(_WORKER)), None)
    if loop is not None:  # a forked worker keeps its parent's frames below its loop: cut
        if waiting:
            return "DataLoader worker idle, waiting for work"
        frames = frames[:loop] or frames[:1]
        if all(is_library(f[1]) for f in frames):
            return f"DataLoader worker in {short(frames[0])}"
    elif any(p.endswith(_LOADER) for p in files):
        if waiting:
            return "waiting on the DataLoader queue"
        if is_library(frames[0][1]):  # e.g. unpickling a batch the workers sent
            return f"in the DataLoader ({frames[0][0]})"
    for i, f in enumerate(frames):
        if not is_library(f[1]):
            inner = f" → {frames[i - 1][0]}" if i > 0 else ""
            return short(f) + inner
    return short(frames[0])


def place(frames: tuple[StackFrame, ...]) -> str:
    """:func:`where` as the end of "it stands …": ``at train.py:40 main``, ``in the
    DataLoader (…)``, ``waiting on the DataLoader queue``, ``idle, waiting for work``."""
    return placed(where(frames))


def placed(w: str) -> str:
    """:func:`place` of a :func:`where` already said (a report's ``where``)."""
    for prefix, said in (("DataLoader worker idle, ", "idle, "), ("DataLoader worker in ", "in "),
                         ("no Python frame", "with no Python frame")):  # fmt: skip
        if w.startswith(prefix):
            return said + w[len(prefix) :]
    return w if w.startswith(("in ", "waiting ")) else f"at {w}"


def user_frame(frames: tuple[StackFrame, ...]) -> StackFrame | None:
    """The innermost frame of the user's own code (a worker's own, not its parent's from
    before the fork), else the innermost frame."""
    loop = next((i for i, f in enumerate(frames) if f[1].endswith(_WORKER)), None)
    if loop:
        frames = frames[:loop]
    for f in frames:
        if not is_library(f[1]):
            return f
    return frames[0] if frames else None


class _Proc:
    __slots__ = ("role", "samples", "where", "frames")

    def __init__(self, role: str) -> None:
        self.role = role
        self.samples = 0
        self.where: Counter[str] = Counter()
        self.frames: Counter[StackFrame] = Counter()


class StacksReducer:
    """Stack samples by process, and the stalls. A stall's step is the one after the last
    step the monitor had when it captured the stacks; where a process sends its steps from
    its training thread (the sender's solo mode), steps it ended since its last send had
    not come yet, so that number can be early. Once the process's steps go on, the step that
    was running when the capture began names the stall (:meth:`_place`)."""

    handles = (StackSample, StallCapture, Step)

    def __init__(self) -> None:
        self.procs: dict[int, _Proc] = {}
        self.stalls: list[StallRow] = []
        self.unplaced: dict[int, list[StallRow]] = {}  # pid: stalls its steps have not passed
        self.last: dict[int, tuple[int, float, float]] = {}  # pid: its last step (i, t0, t1)

    def apply_steps(self, records: Sequence[StepRecord]) -> None:
        if self.unplaced:
            for rec in records:
                if rec[0] in self.unplaced:
                    self._place(rec[0], rec[1], rec[2], rec[3])
        if records:  # (a batch is one process's, as a rule: the others' last may lag)
            rec = records[-1]
            self.last[rec[0]] = (rec[1], rec[2], rec[3])

    def _place(self, pid: int, index: int, t0: float, t1: float) -> None:
        """A step of ``pid`` from ``t0`` to ``t1``: a stall whose capture began before it
        ended is of this step (a hang between steps: the step after that interval). The
        capture began at least MIN_STALL_S after the stall's start (``t - stalled_s``: the
        end of the last step the monitor had), and was over at ``t``: a step that ended
        during the dump (the hang's own step, its end) is the stalled one, not the next,
        unless that next one is itself MIN_STALL_S long and ran when the capture began (a
        solo sender's unsent steps put its start up to 0.25 s after the stall's: a quick
        dump ends less than MIN_STALL_S after it)."""
        rows = self.unplaced[pid]
        for row in [r for r in rows if t1 > r.t - r.stalled_s + MIN_STALL_S]:
            rows.remove(row)
            if index == row.step:
                late = _late(row, t1)
                if late is not row:
                    self.stalls = [late if r is row else r for r in self.stalls]
                continue
            hung = t1 - t0 >= MIN_STALL_S and t0 < row.t - row.stalled_s + MIN_STALL_S
            if not row.during and row.t - t0 < MIN_STALL_S and not hung:
                # begun too late to have run MIN_STALL_S when the capture was over, and no
                # hang of its own running when the capture began: the stalled step ended
                # during the dump and came before the capture did (a loaded host); the
                # capture's own step and length stay
                continue
            # stalled since its step began, not since the last step sent (a hang between
            # steps keeps its own length)
            since = round(row.t - t0, 3) if not row.during and t0 < row.t else row.stalled_s
            fixed = dataclasses.replace(row, step=index, stalled_s=since)
            self.stalls = [fixed if r is row else r for r in self.stalls]
        if not rows:
            del self.unplaced[pid]

    def apply(self, ev: Any) -> None:
        if type(ev) is Step:
            if ev.pid in self.unplaced:
                self._place(ev.pid, ev.index, ev.t0, ev.t1)
            self.last[ev.pid] = (ev.index, ev.t0, ev.t1)
        elif isinstance(ev, StackSample):
            p = self.procs.get(ev.pid)
            if p is None:
                p = self.procs[ev.pid] = _Proc(ev.role)
            p.role = ev.role or p.role
            p.samples += 1
            p.where[where(ev.frames)] += 1
            f = user_frame(ev.frames)
            if f is not None:
                p.frames[f] += 1
        else:
            row = StallRow(
                ev.t, ev.pid, ev.step, ev.stalled_s, ev.median_s, ev.stacks, ev.note, ev.during,
                dump_s=ev.dump_s, states=ev.states,
            )  # fmt: skip
            last = self.last.get(ev.pid)
            if (
                last is not None
                and last[0] == row.step
                and last[2] > row.t - row.stalled_s + MIN_STALL_S
                and not row.during
            ):  # the stalled step's end came already (it ran the stall's length): read after?
                row = _late(row, last[2])
            self.stalls.append(row)
            self.unplaced.setdefault(row.pid, []).append(row)
            if len(self.stalls) > MAX_STALLS:  # the oldest goes, and its wait for a step
                old = self.stalls.pop(0)
                rows = self.unplaced.get(old.pid, [])
                if old in rows:
                    rows.remove(old)
                    if not rows:
                        del self.unplaced[old.pid]

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        rows = []
        for pid, p in self.procs.items():
            n = p.samples
            rows.append(
                StackRow(
                    pid,
                    as_role(p.role),
                    n,
                    tuple((w, c / n) for w, c in p.where.most_common(TOP)),
                    tuple((f, c / n) for f, c in p.frames.most_common(TOP)),
                )
            )
        rows.sort(key=lambda r: (ROLE_ORDER.get(r.role, ROLE_ORDER["other"]), r.pid))
        parts["stacks"] = tuple(rows)
        parts["stalls"] = tuple(self.stalls)
        if self.procs:
            parts["observed_roles"] = {pid: p.role for pid, p in self.procs.items()}


def _late(row: StallRow, end: float) -> StallRow:
    """``row`` without its stacks where its step had ended (by ``end``) before they were
    read: a step just over the stall's bar (2 s) ends while the monitor notices it, and
    the dump then shows what ran after it (the next step's optimizer, not the 2 s wait).
    A capture that does not say when its dump began (an older recording) stays."""
    start = row.t - row.dump_s
    if row.dump_s <= 0.0 or end >= start:
        return row
    note = (
        f"step {step_no(row.step)} ended {(start - end) * 1e3:.0f} ms before its stacks were read: "
        "they showed what ran after it, and are left out"
    )
    return dataclasses.replace(row, stacks=(), note="; ".join(x for x in (row.note, note) if x))


def after_last_step(snap: Snapshot, row: StallRow) -> tuple[int, float] | None:
    """(the last step's index, the seconds from its end to the capture) where a stalled
    step never came: the job exited on its own (code 0, no signal) and its process's last
    step ended before the capture. Live, a step that is late cannot be told from the end
    of training; once the job has ended well it can: what ran was its work after training
    (a final save, an upload, a wait), not a step that stalled. (The capture may name a
    step before the last: steps sent at the exit came after it, all ended before it.) A
    job killed or failed after its last step keeps its stall: a hang it was stopped in."""
    meta = snap.meta
    if row.during or meta.exit_code != 0 or meta.exit_signal:
        return None
    for r in snap.ranks or (snap.steps,):
        if r.pid == row.pid and (not row.host or r.host == row.host):  # (a fleet's node)
            if not r.recent:
                return None
            last = r.recent[-1]
            return (last.index, row.t - last.t1) if last.t1 <= row.t else None
    return None
