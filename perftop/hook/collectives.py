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

import os
import sys
import threading
import time
from typing import Any

from perftop.events import CollBatch, CollInfo, CollWaiting
from perftop.hook import coll_recorder as rec
from perftop.hook.coll_origin import origin
from perftop.hook.sender import epoch_offset

HOLD_S = 1.0  # an NCCL record is sent once retired with its GPU time, or when this old
POLL_S = 0.5
# The exit's final read waits this long for a read the sender's thread is making (a ring of
# 256 records with stacks: 15-60 ms on a loaded 2-core machine), then reads what is left.
# Two reads at once each sent the records after where the other had got to: a rank's
# all-reduces counted up to 1.4 times (tests/test_comm_exit.py).
FINAL_WAIT_S = 0.1
WAIT_REPORT_S = 1.0  # a collective incomplete this long is reported, about once a second


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
        self.off = not rec.enabled()
        self.reported: dict[tuple[str, int], float] = {}  # (ring, id) -> its wait's last send
        self.timed = rec.gpu_timed()
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
            if not made and not (final and rec.buffer_size() > 0):
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
        size = rec.buffer_size()
        c10d = getattr(getattr(sys.modules.get("torch"), "_C", None), "_distributed_c10d", None)
        rings = [Ring(name, read) for name, read in rec.readers(c10d)]
        why = ""
        if not rings:
            why = "this torch has no flight recorder dump (_dump_fr_trace)"
        elif size <= 0:
            why = f"{rec.ENV_BUFFER} is not set in the job (or is 0): the recorder keeps nothing"
        if not why:
            self.rings, self.off = rings, False
        return CollInfo(time.time(), self.pid, size if not why else 0, why)

    def _send(self, dumps: list[tuple[Ring, Any]], final: bool = False) -> None:
        train = getattr(self.state.tracker, "thread", 0)
        records: list[tuple[Any, ...]] = []
        now = time.time()
        # The records' system-clock times onto the steps' clock (perf_counter plus the
        # sender's offset, read again at its last send: Sender.retime), read again now: the
        # system clock may have been set since, and a backward's collective must stay
        # inside that backward.
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
                    held = self.timed and not final and rec.untimed(e) and now - wall < HOLD_S
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
                        w = CollWaiting(now, self.pid, pgname, seq, op, rec.sizes(e),
                                        round(created, 6), round(now - wall, 3),
                                        user_line(tid))  # fmt: skip
                        self.state.sender.put(w, urgent=True)
        self.reported = {k: v for k, v in self.reported.items() if k in pending}
        if records:
            lost = sum(r.lost for r in self.rings or ())
            self.state.sender.put(CollBatch(now, self.pid, tuple(records), lost))

    @staticmethod
    def _record(e: Any, pg: str, seq: int, op: str, created: float, train: bool) -> Any:
        b = rec.nbytes(e.get("input_sizes"), e.get("input_dtypes"))
        try:
            call, phase, line = origin(e.get("frames"))
        except Exception:  # a stack of an unexpected shape: no origin, the record stays
            call = phase = line = ""
        dur = e.get("duration_ms")
        gpu = round(float(dur) / 1e3, 6) if isinstance(dur, (int, float)) and dur >= 0 else None
        return (pg, seq, op, b, rec.sizes(e), round(created, 6), int(train), call, phase, line, gpu)


def attach(state: Any) -> None:
    """Add the poller to the sender's wakes (a no-op with ``PERFTOP_COMM=0``)."""
    if rec.enabled():
        poller = CommPoller(state)
        state.comm = poller
        state.sender.pollers.append(poller)
