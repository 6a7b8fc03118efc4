"""The job's process tree, sampled from the monitor: CPU, threads, memory (USS/PSS), IO.

Why these reads: RSS double-counts pages a DataLoader worker shares with its parent, so
USS (private pages) and PSS (shared pages split between their users) come from psutil's
``memory_full_info()`` (on Linux one ``smaps_rollup`` read the kernel sums for us; it costs
a page-table walk: ~0.15 ms for a small process, ~9 ms for one that imported torch, so it
is paced by its cost, see :data:`MEM_BUDGET`). Everything else comes from psutil inside
``oneshot()`` so ``stat`` and ``status`` are each read once per process per tick. What the
OS cannot give (see :mod:`perftop.probes.platform`) is None, and the rest still shows. A
process that exits between two reads is simply gone from the next sample.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import psutil

from perftop.events import Event, Note, ProcInfo, ProcSample
from perftop.probes.cpulimit import read_affinity, read_cgroups
from perftop.probes.platform import PlatformCaps, platform_caps
from perftop.probes.procread import (
    START_RESOLUTION_S,
    UNAVAILABLE,
    _optional,
    _ppid,
    _start_ticks,
    boot_now,
    descendants,
    read_memory,
    read_run_delay,
    start_seconds,
)

GONE = (psutil.NoSuchProcess, psutil.ZombieProcess)
INFO_EVERY = 60  # re-send command lines this often (ticks) so a late recording has them
CMDLINE_MAX = 300
BLANK_TRIES = 30  # ticks an empty command line is read again (see _Tracked.blank_tries)
# With more than this many processes, each one's USS/PSS is refreshed every
# ceil(n / SMAPS_PER_TICK) ticks, staggered (last figures meanwhile).
SMAPS_PER_TICK = 10
# All processes' USS/PSS reads together take at most this share of one core (a quarter of
# what the headless monitor may take in all): each process is read again when its last
# read's CPU time x the number of processes / MEM_BUDGET has passed (every tick for small
# processes; 3-4 s for the demo's three torch processes on a quiet machine, ~15 s for a
# torch job of 4 processes whose reads take 10 ms), and at least every MEM_MAX_AGE_S. The
# figures shown meanwhile are the last read's; a rising process is read at every tick.
MEM_BUDGET, MEM_MAX_AGE_S = 0.0025, 30.0
# A process whose USS rose this fast (half the worker hint's GROW_RATE) over each of its last
# two reads is read at every tick whatever it costs, so its growth gets 1 s samples.
MEM_MOVING_BPS = 0.25 * 2**20
# A fork of its parent's program (a DataLoader worker) is read at every tick for its first
# MEM_FORK_FIRST_S and while each read rises fast; flat, every MEM_FORK_FLAT_S until
# MEM_FORK_WATCH_S (paced, ~7 s, its growth would reach the worker hint's fit late).
MEM_FORK_WATCH_S, MEM_FORK_FIRST_S, MEM_FORK_FLAT_S = 30.0, 5.0, 3.0
# ... and first read a tick after it was first seen, not at once: a loader's worker that
# lives under a second (an HF Trainer's evaluation makes a new loader, new workers, each
# time) costs no page-table walk (~9 ms for a torch process); one that lives on is read at
# every tick from its second second (its USS then N/A for a tick, as a figure not yet read).
MEM_FORK_DEFER_S = 0.9
# A process's CPU time counts in clock ticks (10 ms): over an interval this long or longer
# its CPU share is within 5% of a core. Two ticks close together (a tick the monitor asks
# for at once, as a process appears) read a rank's 10 ms in 3 ms: 335% on 2 cores.
CPU_MIN_S = 0.2
# A process's cgroup CPU limit is read at its first tick and then every this many ticks
# (a job that moves itself into a cgroup does so as it starts: a few file reads each);
# where its memory cgroup counts its OOM kills, at every tick (~15 µs: a process killed
# right after a move must be weighed against its new cgroup, exits.py)
QUOTA_EVERY = 5


@dataclass(slots=True)
class _Tracked:
    proc: psutil.Process
    key: tuple[int, float]  # (pid, create_time): a reused pid is a new process
    cpu_s: float | None = None  # its CPU time at ``mono``, the start of its CPU interval
    cpu_pct: float | None = None  # over the last interval of CPU_MIN_S or more
    io: tuple[int, int] | None = None
    mono: float = 0.0
    name: str = ""
    cmdline: str = ""
    start: Any = None  # start time in clock ticks, as /proc/PID/stat says
    born: float | None = None  # ... in seconds since boot (CLOCK_BOOTTIME), where it parses
    mem: tuple[int | None, int | None, int | None] | None = None  # last (uss, pss, swap)
    mem_at: float = 0.0  # when it was read (monotonic)
    mem_cost: float = 0.0  # the CPU seconds that read took
    mem_rises: int = 0  # reads in a row whose USS rose fast (see MEM_MOVING_BPS)
    fork_until: float | None = None  # a fork of its parent's program: watched (monotonic)
    fork_first: float = 0.0  # ... and read at every tick until then
    seen_at: float = 0.0  # first seen (monotonic)
    execed: bool = False  # its program changed since it was first seen (a fork, then exec)
    # ticks left to read an empty command line again: one read between a fork and its exec
    # of a program of the same name (Ray's workers, a python starting python) is empty
    blank_tries: int = 0
    quota: float | None = None  # cores its cgroup's CPU limit allows (cpulimit.py)
    quota_ticks: int = 0  # ticks since that was read
    oom_file: str | None = None  # where its memory cgroup counts OOM kills (cpulimit.py)


def _read_cmdline(tr: _Tracked, tries: int = BLANK_TRIES) -> None:
    """Its command line, as one string; read empty (inside an exec), read again at each of
    the next ``tries`` ticks (``blank_tries``); not ours to read: empty."""
    try:
        tr.cmdline = " ".join(tr.proc.cmdline())[:CMDLINE_MAX]
    except psutil.AccessDenied:
        tr.cmdline, tr.blank_tries = "", 0
    else:
        tr.blank_tries = 0 if tr.cmdline else tries


def _rose(last: Any, new: Any, dt: float) -> bool:
    """Whether USS rose at least :data:`MEM_MOVING_BPS` between two reads."""
    if last is None or last[0] is None or new[0] is None or dt <= 0:
        return False
    return new[0] - last[0] >= MEM_MOVING_BPS * dt


class ProcProbe:
    """Samples the tree under ``root_pid``; keeps psutil objects across ticks so CPU % and IO
    rates are deltas from the previous tick of the same (pid, create_time)."""

    name = "procs"

    def __init__(
        self,
        root_pid: int,
        caps: PlatformCaps | None = None,
        *,
        mem_budget: float = MEM_BUDGET,
        mem_max_age_s: float = MEM_MAX_AGE_S,
    ) -> None:
        self.root_pid = root_pid
        self.caps = caps or platform_caps()
        self.mem_budget, self.mem_max_age_s = mem_budget, mem_max_age_s
        self._n = 1  # processes in the last tick
        self._tracked: dict[int, _Tracked] = {}
        self.pids: list[int] = []  # the job's tree at the last tick
        self._last_mono: float | None = None
        # since when a process first seen was born in this probe's sight (the last tick's
        # start, its creation before the first): seconds since boot
        self._since_boot = boot_now()
        self._ticks = 0
        self._stride = 1
        # pid -> the native id of its training thread where the hook saw it run on another
        # than the main one (ThreadWatch sets it, a new dict each time): its wait for a core
        # is read there
        self.threads: dict[int, int] = {}

    def oom_files(self) -> dict[int, str]:
        """pid -> the file where its memory cgroup counts OOM kills (ExitProbe's)."""
        return {pid: tr.oom_file for pid, tr in self._tracked.items() if tr.oom_file}

    def sample(self, t: float) -> list[Event]:
        now = time.monotonic()
        dt = 0.0 if self._last_mono is None else now - self._last_mono
        self._last_mono = now
        since, self._since_boot = self._since_boot, boot_now()
        pids = self.pids = descendants(self.root_pid, self.caps)  # (ExitProbe watches them)
        events: list[Event] = []
        if self._ticks == 0 and self.caps.note:
            events.append(Note(t, "warning", "platform", self.caps.note))
        rows: list[tuple[Any, ...]] = []
        alive: dict[int, _Tracked] = {}
        resend = self._ticks % INFO_EVERY == 0
        self._stride = max(1, -(-len(pids) // SMAPS_PER_TICK))
        self._n = max(1, len(pids))
        self._ticks += 1
        for pid in pids:
            tr = self._tracked.get(pid)
            try:
                if tr is None:
                    tr = self._track(pid, now)
                    events.append(ProcInfo(t, pid, tr.key[1], tr.cmdline))
                elif resend:
                    events.append(ProcInfo(t, pid, tr.key[1], tr.cmdline))
                row = self._read(tr, now, since)
                if row is None:  # the pid was reused by a new process: start afresh
                    tr = self._track(pid, now)
                    events.append(ProcInfo(t, pid, tr.key[1], tr.cmdline))
                    row = self._read(tr, now, since)
                    if row is None:  # reused once more while we looked: next tick
                        continue
                if tr.execed:  # first seen between fork and exec: its command line now
                    tr.execed = False
                    events.append(ProcInfo(t, pid, tr.key[1], tr.cmdline))
            except GONE:
                continue
            except psutil.AccessDenied:
                continue  # not ours to watch (a setuid helper)
            alive[pid] = tr
            rows.append(row)
        self._tracked = alive
        events.append(ProcSample(t, round(dt, 4), self.root_pid, tuple(rows)))
        return events

    def _track(self, pid: int, now: float) -> _Tracked:
        p = psutil.Process(pid)
        tr = _Tracked(p, (pid, p.create_time()), seen_at=now)
        with p.oneshot():
            tr.start = _start_ticks(p)
            tr.born = start_seconds(tr.start)
            tr.name = p.name()
            ppid = _ppid(p)
            _read_cmdline(tr)
        if tr.cmdline and pid != self.root_pid and self._same_program(ppid, tr.cmdline):
            tr.fork_until, tr.fork_first = now + MEM_FORK_WATCH_S, now + MEM_FORK_FIRST_S
        return tr

    def _same_program(self, ppid: int, cmdline: str) -> bool:
        """Whether the parent (in the tree) runs ``cmdline``: the child is a fork of it."""
        if (parent := self._tracked.get(ppid)) is not None:
            return parent.cmdline == cmdline
        try:  # not tracked yet (seen this tick): a descendant's parent is in the tree
            return " ".join(psutil.Process(ppid).cmdline())[:CMDLINE_MAX] == cmdline
        except (*GONE, *UNAVAILABLE):
            return False

    def _mem_due(self, tr: _Tracked, now: float) -> bool:
        """Whether to read its USS/PSS again: at its first sample (a fork's, at its first a
        tick later: :data:`MEM_FORK_DEFER_S`), then when its share of :data:`MEM_BUDGET`
        allows; staggered by pid (about as many reads at each tick)."""
        if tr.mem is None:  # a fork's first a tick on (a short-lived worker's never)
            return tr.fork_until is None or now - tr.seen_at >= MEM_FORK_DEFER_S
        if tr.mem_rises >= 2:
            return True
        if tr.fork_until is not None and (
            tr.mem_rises >= 1  # a fork: at every tick while it rises
            or now < tr.fork_first
            or (now < tr.fork_until and now - tr.mem_at + 0.1 >= MEM_FORK_FLAT_S)
        ):
            return True
        period = min(self.mem_max_age_s, tr.mem_cost * self._n / self.mem_budget)
        if now - tr.mem_at + 0.1 < period:  # 0.1 s: a tick that came a little early
            return False
        return (self._ticks + tr.proc.pid) % self._stride == 0

    def _read(self, tr: _Tracked, now: float, since: float) -> tuple[Any, ...] | None:
        """The row, or None when this pid is no longer the process we tracked. ``since``:
        the last tick's start (seconds since boot): a process born after it has its CPU
        share from its birth at its first read (a worker of a short evaluation may live one
        tick), as a later tick's is from the tick before."""
        p = tr.proc
        # when its CPU time is read (its stat, the block's first read): a tick's reads of
        # the processes before it (their memory: ms each on a busy host) must not stretch
        # or shrink its interval
        at, boot_at = time.monotonic(), boot_now()
        with p.oneshot():
            if _start_ticks(p) not in (None, tr.start):
                return None
            name = p.name()
            if name != tr.name:  # the same process ran another program (exec)
                tr.name, tr.execed = name, True
                _read_cmdline(tr)
            elif tr.blank_tries > 0:  # read empty: again, until it says what runs
                _read_cmdline(tr, tr.blank_tries - 1)
                tr.execed = tr.execed or bool(tr.cmdline)
            ct = p.cpu_times()
            ppid = _ppid(p)
            state = p.status()
            core = _optional(p.cpu_num) if self.caps.core_placement else None
            threads = p.num_threads()
            rss = _optional(lambda: p.memory_info().rss)
            io = _optional(p.io_counters)
            io_now = None if io is None else (io.read_bytes, io.write_bytes)
            tid = self.threads.get(p.pid)  # its training thread, where not the main one
            wait = read_run_delay(p.pid, tid)  # beside its CPU time: one interval for both
        cpus = read_affinity(p.pid)
        if tr.quota_ticks % QUOTA_EVERY == 0:
            tr.quota, tr.oom_file = read_cgroups(p.pid)
        else:
            tr.oom_file = read_cgroups(p.pid, quota=False)[1]
        tr.quota_ticks += 1
        if state == psutil.STATUS_ZOMBIE or rss == 0:
            # no resident page: its address space is gone, it is past the point of exit
            # where the kernel frees it (a user process alive has pages); a row now would
            # show it holding no memory for the moment before it is a zombie
            raise psutil.ZombieProcess(p.pid)
        cpu_s = ct.user + ct.system
        if tr.cpu_s is None or at - tr.mono >= CPU_MIN_S:
            if tr.cpu_s is not None:
                tr.cpu_pct = round(max(0.0, cpu_s - tr.cpu_s) / (at - tr.mono) * 100.0, 1)
            elif (
                tr.born is not None
                and tr.born + START_RESOLUTION_S > since  # (born in the tick it is cut to)
                and boot_at - tr.born >= CPU_MIN_S
            ):
                tr.cpu_pct = round(cpu_s / (boot_at - tr.born) * 100.0, 1)  # since its birth
            tr.cpu_s, tr.mono = cpu_s, at
        cpu_pct = tr.cpu_pct  # a tick soon after the last: the interval goes on
        io_read = io_write = None
        if io_now is not None and tr.io is not None:
            io_read, io_write = max(0, io_now[0] - tr.io[0]), max(0, io_now[1] - tr.io[1])
        elif io_now is not None:
            io_read = io_write = 0
        tr.io = io_now
        if self._mem_due(tr, now):
            c0 = time.thread_time()
            mem = read_memory(p, self.caps)
            tr.mem_rises = tr.mem_rises + 1 if _rose(tr.mem, mem, now - tr.mem_at) else 0
            tr.mem, tr.mem_cost, tr.mem_at = mem, time.thread_time() - c0, now
        uss, pss, swap = tr.mem or (None, None, None)
        return (
            p.pid,
            ppid,
            tr.name,
            state,
            cpu_pct,
            core,
            threads,
            rss,
            uss,
            pss,
            swap,
            io_read,
            io_write,
            round(cpu_s, 3),
            None if wait is None else round(wait, 4),
            cpus,
            tr.quota,
            tid,
        )
