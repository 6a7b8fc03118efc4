"""Collectives per rank, read from c10d's flight recorder on the hook's background thread.

torch's flight recorder keeps a ring of the collectives each process entered: process
group, sequence id, op, sizes, and the system clock's time it was created (torch 2.13
keeps it for gloo too, once ``TORCH_FR_BUFFER_SIZE`` is set before the first process group
is made). torch 2.13 keeps NCCL's collectives in a ring of their own, read with
``_dump_nccl_trace`` where the build has it (a CUDA build): both rings are read, each
record once; an NCCL record goes with its time on the GPU (``duration_ms``, once timed and
retired). Nothing here wraps a ``torch.distributed`` function or registers a comm hook:
the sender's thread (never the training thread) reads the rings twice a second once the
job has initialized ``torch.distributed``, and sends the records it had not seen (a
single-process job never does: one ``sys.modules`` lookup per wake).

A collective that stays incomplete is reported about once a second while it waits
(:class:`CollWaiting`), with the user's line its launching thread stands at: what a hang
needs, from the waiting rank's side. ``PERFTOP_COMM=0`` turns all of it off.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from perftop.events import CollBatch, CollInfo, CollWaiting
from perftop.hook.coll_origin import origin
from perftop.hook.sender import epoch_offset

ENV_OFF = "PERFTOP_COMM"
ENV_BUFFER = "TORCH_FR_BUFFER_SIZE"
# Its older name, which torch still reads (TORCH_FR_BUFFER_SIZE wins where both are set): a
# job that set it has chosen its ring, and perftop must not override that choice.
ENV_BUFFER_OLD = "TORCH_NCCL_TRACE_BUFFER_SIZE"
# The ring perftop asks for when the job did not set one. A read's cost grows faster than
# the ring (benchmarks/comm_recorder.py: 64 entries under 1 ms, 512 entries 15-60 ms on a
# loaded 2-core machine), and two reads a second must see every record: 256.
BUFFER = 256
# NCCL's GPU time of each collective (CUDA events its watchdog reads once the work is done),
# used where the job turned it on; never set here: its events can cost a job its compute
# and communication overlap (pytorch/pytorch#143890, CUDA_DEVICE_MAX_CONNECTIONS=1)
ENV_TIMING = "TORCH_NCCL_ENABLE_TIMING"
HOLD_S = 1.0  # an NCCL record is sent once retired with its GPU time, or when this old
POLL_S = 0.5
# The exit's final read waits this long for a read the sender's thread is making (a ring of
# 256 records with stacks: 15-60 ms on a loaded 2-core machine), then reads what is left.
# Two reads at once each sent the records after where the other had got to: a rank's
# all-reduces counted up to 1.4 times (tests/test_comm_exit.py).
FINAL_WAIT_S = 0.1
WAIT_REPORT_S = 1.0  # a collective incomplete this long is reported, about once a second
_DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
                "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16}  # fmt: skip


def enabled(environ: Any = os.environ) -> bool:
    return environ.get(ENV_OFF, "").strip() != "0"


def prepare_env(environ: Any = os.environ) -> None:
    """Once the hook is armed, before the job's first process group (torch reads the
    setting when it makes the recorder, at the first group): ask for the recorder's ring,
    unless the job set its own size. In every process, as a rank is not always known by its
    environment: torchrun sets ``WORLD_SIZE``, but Ray Train sets it only just before its
    first group, and ``torch.multiprocessing.spawn`` and Lightning's launcher pass the rank
    to ``init_process_group``. A process that makes no group records nothing; one that
    does keeps 256 entries (torch 2.13's default is 2,000, which a read could not afford)."""
    if enabled(environ) and ENV_BUFFER not in environ and ENV_BUFFER_OLD not in environ:
        environ[ENV_BUFFER] = str(BUFFER)


def gpu_timed(environ: Any = os.environ) -> bool:  # torch reads the flag as a boolean
    return environ.get(ENV_TIMING, "").strip().lower() in ("1", "true", "yes", "y")


def untimed(e: Any) -> bool:  # an NCCL record the watchdog has not retired with its time
    name = str(e.get("profiling_name", ""))
    return name.startswith("nccl:") and e.get("duration_ms") is None and not e.get("retired")


def buffer_size(environ: Any = os.environ) -> int:
    """The recorder's ring as torch reads it: the new name first, then the old one."""
    for name in (ENV_BUFFER, ENV_BUFFER_OLD):
        if name in environ:
            try:
                return int(environ[name] or 0)
            except ValueError:
                return 0
    return 0


def nbytes(sizes: Any, dtypes: Any) -> int:
    total = 0
    for shape, dt in zip(sizes or (), dtypes or ()):
        n = 1
        for d in shape:
            n *= int(d)
        total += n * _DTYPE_BYTES.get(str(dt), 4)
    return total


def user_line(thread_id: int) -> str:
    """``file:line function`` of the innermost user frame of thread ``thread_id``."""
    from perftop.hook import frames

    f: Any = sys._current_frames().get(thread_id)
    while f is not None and frames.kind_of(f.f_code) != frames.USER:
        f = f.f_back
    return "" if f is None else f"{f.f_code.co_filename}:{f.f_lineno} {f.f_code.co_name}"


class Ring:
    """One recorder's ring as this process reads it: c10d keeps one for gloo (and any
    backend on CPU events) and, in a CUDA build, NCCL's own; their record ids are their own."""

    __slots__ = ("name", "read", "last_id", "lost")

    def __init__(self, name: str, read: Any) -> None:
        self.name, self.read = name, read
        self.last_id = -1  # the newest record id sent
        self.lost = 0


class CommPoller:
    """Called on every wake of the sender's thread (``Sender.pollers``)."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.pid = os.getpid()
        self.next_t = 0.0
        self.rings: list[Ring] | None = None
        self.off = not enabled()
        self.reported: dict[tuple[str, int], float] = {}  # (ring, id) -> its wait's last send
        self.timed = gpu_timed()
        self.lock = threading.Lock()  # one read at a time: the sender's thread's, the exit's

    def __call__(self, final: bool = False) -> None:
        if self.off or os.getpid() != self.pid:  # a forked DataLoader worker: not a rank
            return
        # a wake finding the exit's read under way skips (the exit sends what it reads)
        if not (self.lock.acquire(timeout=FINAL_WAIT_S) if final else self.lock.acquire(False)):
            return
        try:
            self._poll(final)
        finally:
            self.lock.release()

    def _poll(self, final: bool) -> None:
        now = time.monotonic()
        if now < self.next_t and not final:
            return
        self.next_t = now + POLL_S
        info = None  # how this process reads its collectives: said once, with its first read
        if self.rings is None:
            dist = sys.modules.get("torch.distributed")
            if dist is None or not dist.is_available():
                return
            made = dist.is_initialized()
            if not made and not (final and buffer_size() > 0):
                return  # at exit, a group made and destroyed already is read once
            info = self._start()
            if self.rings is None:
                if made:
                    self.state.sender.put(info)
                return
        dumps = []
        for ring in self.rings:
            try:
                dumps.append((ring, ring.read().get("entries") or ()))
            except Exception:
                self.state.internal_error(f"collectives ({ring.name})")
                self.off = True
                return
        if info is not None:
            if not made and not any(entries for _ring, entries in dumps):
                return  # at exit, no group and no record: a process that made none
            self.state.sender.put(info)
        self._send(dumps, final)

    def _start(self) -> CollInfo:
        """The rings, read from now on where the recorder keeps records; what to say of
        them (said with the first read, or, with no group at exit, where it holds records:
        a process that made no group says nothing)."""
        self.off = True
        size = buffer_size()
        c10d = getattr(getattr(sys.modules.get("torch"), "_C", None), "_distributed_c10d", None)
        rings = [Ring(name, read) for name, read in _readers(c10d)]
        why = ""
        if not rings:
            why = "this torch has no flight recorder dump (_dump_fr_trace)"
        elif size <= 0:
            why = f"{ENV_BUFFER} is not set in the job (or is 0): the recorder keeps nothing"
        if not why:
            self.rings, self.off = rings, False
        return CollInfo(time.time(), self.pid, size if not why else 0, why)

    def _send(self, dumps: list[tuple[Ring, Any]], final: bool = False) -> None:
        train = getattr(self.state.tracker, "thread", 0)
        records: list[tuple[Any, ...]] = []
        now = time.time()
        # The records' system-clock times onto the steps' clock (perf_counter plus the
        # offset read at the hook's start), read again now: the two clocks drift apart
        # (NTP slews the system clock; it may be stepped), and a backward's collective
        # must stay inside that backward.
        shift = epoch_offset() - self.state.sender.epoch_offset
        pending: set[tuple[str, int]] = set()
        seen: set[tuple[Any, ...]] = set()  # a torch whose rings are one: each record once
        for ring, entries in dumps:
            first, held = True, False  # held: a record waits for its GPU time, and all after it
            for e in entries:
                rid = int(e.get("record_id", -1))
                wall = int(e.get("time_created_ns", 0)) / 1e9
                created = wall - shift
                pg = e.get("process_group") or ("", "")
                pgname = str(pg[1] or pg[0]) if len(pg) > 1 else str(pg[0])
                op = str(e.get("profiling_name", "")).rsplit(":", 1)[-1]
                seq = int(e.get("collective_seq_id", 0))
                if e.get("is_p2p"):
                    seq = -int(e.get("p2p_seq_id", 0))
                key = (pgname, seq, op, e.get("time_created_ns"))
                if key in seen:
                    ring.last_id = max(ring.last_id, rid)
                    continue
                seen.add(key)
                try:
                    tid = int(e.get("thread_id", 0))
                except ValueError:
                    tid = 0
                if rid > ring.last_id and not held:
                    held = self.timed and not final and untimed(e) and now - wall < HOLD_S
                    if not held:
                        if ring.last_id >= 0 and first and rid > ring.last_id + 1:
                            ring.lost += rid - ring.last_id - 1
                        first = False
                        records.append(self._record(e, pgname, seq, op, created, tid == train))
                        ring.last_id = rid
                if not e.get("retired", True) and now - wall >= WAIT_REPORT_S:
                    pending.add((ring.name, rid))
                    if now - self.reported.get((ring.name, rid), 0.0) >= WAIT_REPORT_S:
                        self.reported[(ring.name, rid)] = now
                        w = CollWaiting(now, self.pid, pgname, seq, op, _sizes(e),
                                        round(created, 6), round(now - wall, 3),
                                        user_line(tid))  # fmt: skip
                        self.state.sender.put(w, urgent=True)
        self.reported = {k: v for k, v in self.reported.items() if k in pending}
        if records:
            lost = sum(r.lost for r in self.rings or ())
            self.state.sender.put(CollBatch(now, self.pid, tuple(records), lost))

    @staticmethod
    def _record(e: Any, pg: str, seq: int, op: str, created: float, train: bool) -> Any:
        b = nbytes(e.get("input_sizes"), e.get("input_dtypes"))
        try:
            call, phase, line = origin(e.get("frames"))
        except Exception:  # a stack of an unexpected shape: no origin, the record stays
            call = phase = line = ""
        dur = e.get("duration_ms")
        gpu = round(float(dur) / 1e3, 6) if isinstance(dur, (int, float)) and dur >= 0 else None
        return (pg, seq, op, b, _sizes(e), round(created, 6), int(train), call, phase, line, gpu)


def _sizes(e: Any) -> str:
    """A record's input shapes as text ("[[17]]"), at most 200 characters."""
    return json.dumps(e.get("input_sizes") or [], separators=(",", ":"))[:200]


def _readers(c10d: Any) -> list[tuple[str, Any]]:
    """The recorder's rings this torch can read, each as a call giving a dict: c10d's
    own (``_dump_fr_trace``: gloo) and, in a CUDA build, NCCL's (``_dump_nccl_trace``),
    which torch 2.13 keeps apart. A torch whose two names read one ring gives each record
    twice: ``CommPoller._send`` keeps one."""
    out = []
    for name, base in (("fr", "_dump_fr_trace"), ("nccl", "_dump_nccl_trace")):
        read = _reader(c10d, base)
        if read is not None:
            out.append((name, read))
    return out


def _reader(c10d: Any, base: str = "_dump_fr_trace") -> Any:
    """A call that reads one ring as a dict: torch's pickled dump (``base``) with the
    Python stacks it kept (where each collective came from: :mod:`coll_origin`), else its
    JSON dump (``base + "_json"``); None where this torch has neither. A dump with stacks
    that fails is made without them from then on. The pickle is torch's own, made in this
    process from its own memory."""
    pickled = getattr(c10d, base, None)
    if pickled is not None:
        import pickle

        stacks = [True]

        def read() -> Any:
            try:
                return pickle.loads(pickled(True, stacks[0], False))
            except Exception:
                if not stacks[0]:
                    raise
                stacks[0] = False
                return pickle.loads(pickled(True, False, False))

        return read
    dumped = getattr(c10d, base + "_json", None)
    if dumped is not None:
        return lambda: json.loads(dumped(True, False))
    return None


def attach(state: Any) -> None:
    """Add the poller to the sender's wakes (a no-op with ``PERFTOP_COMM=0``)."""
    if enabled():
        poller = CommPoller(state)
        state.comm = poller
        state.sender.pollers.append(poller)
