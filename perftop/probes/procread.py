"""Reads of one process, or of a tree of them, that keep nothing between two ticks: the
tree below a pid, a field of the ``stat`` read psutil cached, a figure this OS may not
have, USS/PSS. It stands alone because the monitor's other parts (stack capture, the job's
stdin, ``perftop ls``) walk the job's tree too, without the process probe's state.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

from perftop.events.stacks import HELD_STATES
from perftop.probes.platform import PlatformCaps, platform_caps

# What a figure psutil does not have on this OS (or for this process) raises: N/A, not a gap.
UNAVAILABLE = (AttributeError, NotImplementedError, psutil.AccessDenied)
# Clock ticks a second, the unit of a process's start time in /proc/PID/stat.
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A start time is cut down to its clock tick: the birth lies within this after it.
START_RESOLUTION_S = 1.0 / _CLK_TCK


def descendants(root: int, caps: PlatformCaps | None = None) -> list[int]:
    """The root and every process below it, read from ``/proc/PID/task/TID/children``
    (cost grows with the job, not with the host); psutil's full ppid scan elsewhere."""
    caps = caps or platform_caps()
    if not caps.proc_children or not os.path.exists(
        f"/proc/{os.getpid()}/task/{os.getpid()}/children"
    ):
        try:
            return [root] + [c.pid for c in psutil.Process(root).children(recursive=True)]
        except psutil.Error:
            return []
    out: list[int] = []
    stack = [root]
    seen = {root}
    while stack:
        pid = stack.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone
        out.append(pid)
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            for c in data.split():
                child = int(c)
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
    return out


def _stat(p: psutil.Process, field: str) -> Any:
    """A field of the ``stat`` read that ``oneshot()`` already cached, None where this
    psutil does not keep it so. psutil's own ``is_running()`` (which ``ppid()`` calls in
    psutil 7 too) would build another ``Process`` and read ``stat`` again: a third of this
    probe's cost."""
    try:
        return p._proc._parse_stat_file()[field]  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, KeyError, TypeError):
        return None


def boot_now() -> float:
    """Seconds since boot, the clock a process's start time counts on (/proc/PID/stat);
    where there is no such clock (not Linux) no start time is read either."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    return time.monotonic() if clock is None else time.clock_gettime(clock)


def start_seconds(ticks: Any) -> float | None:
    """A start time in clock ticks (:func:`_start_ticks`) in seconds since boot, or None."""
    try:
        return float(ticks) / _CLK_TCK
    except (TypeError, ValueError):
        return None


def _start_ticks(p: psutil.Process) -> Any:
    """The process's start time (another psutil: None, no reuse check beyond (pid,
    create_time) at start)."""
    return _stat(p, "create_time")


def _ppid(p: psutil.Process) -> int:
    stat = _stat(p, "ppid")
    return int(stat) if stat is not None else p.ppid()


def _optional(read: Any) -> Any:
    """``read()``, or None when this OS or this process will not say."""
    try:
        return read()
    except UNAVAILABLE:
        return None


def read_memory(p: psutil.Process, caps: PlatformCaps) -> tuple[int | None, int | None, int | None]:
    """(uss, pss, swap) in bytes from psutil, each None where the OS cannot give it."""
    if not caps.uss:
        return None, None, None
    full = _optional(p.memory_full_info)
    if full is None:
        return None, None, None
    uss = getattr(full, "uss", None)
    pss = getattr(full, "pss", None) if caps.pss else None
    swap = getattr(full, "swap", None) if caps.pss else None
    if not uss and not pss:
        return None, None, None  # a process being torn down: its pages are not countable
    return uss, pss, swap


def read_run_delay(pid: int, tid: int | None = None) -> float | None:
    """Seconds the process's main thread (or its thread ``tid``) has spent runnable and
    waiting for a core (the run-queue delay the scheduler keeps: ``/proc/PID/schedstat``'s
    second field; psutil has no such figure); None where this kernel does not keep it or
    the process or thread is gone."""
    path = f"/proc/{pid}/schedstat" if tid is None else f"/proc/{pid}/task/{tid}/schedstat"
    try:
        with open(path, "rb") as f:
            fields = f.read(128).split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def held_state(pid: int) -> str:
    """``pid``'s state, psutil's word for it, where the process is held where it stands
    (``HELD_STATES``: stopped, stopped by a tracer, in uninterruptible sleep), else "" (it
    runs or sleeps as processes do, or is gone)."""
    try:
        state = psutil.Process(pid).status()
    except psutil.Error:
        return ""
    return state if state in HELD_STATES else ""
