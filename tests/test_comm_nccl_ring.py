"""NCCL's collectives are read from their own ring. torch 2.13 keeps them in a flight
recorder of NCCL's (``_dump_nccl_trace``, a CUDA build's), apart from gloo's
(``_dump_fr_trace``): reading gloo's alone, a GPU job showed no collective at all.

This machine has no NCCL: the two dumps are torch's interface as a CUDA build has it, with
records of the shape NCCL's recorder writes (``nccl:`` names, ``state``, the watchdog's
discovery times, ``duration_ms`` with timing on, thread ids as text). The real run is in
tests/gpu/test_cuda.py (scripts/gpu_check.sh)."""

from __future__ import annotations

import pickle
import sys
import time
import types
from typing import Any

import pytest

from perftop.events import CollBatch, CollInfo, CollWaiting
from perftop.hook.collectives import CommPoller
from perftop.hook.sender import epoch_offset


def nccl_entry(rid: int, seq: int, op: str, created: float, done: bool = True) -> dict[str, Any]:
    ns = int(created * 1e9)
    return {
        "record_id": rid, "pg_id": 0, "process_group": ("0", "default_pg"),
        "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
        "profiling_name": f"nccl:{op}", "time_created_ns": ns,
        "input_sizes": [[1024]], "input_dtypes": ["Float"],
        "output_sizes": [[1024]], "output_dtypes": ["Float"],
        "state": "completed" if done else "started",
        "time_discovered_started_ns": ns + 120_000,
        "time_discovered_completed_ns": ns + 480_000 if done else None,
        "retired": done, "timeout_ms": 600000, "is_p2p": False,
        "duration_ms": 0.31 if done else None,
        "thread_id": "140211", "thread_name": "pt_main_thread",
    }  # fmt: skip


def gloo_entry(rid: int, seq: int, created: float) -> dict[str, Any]:
    e = nccl_entry(rid, seq, "barrier", created)
    e.update(process_group=("1", "cpu_group"), profiling_name="gloo:barrier", input_sizes=[[1]],
             state="scheduled", duration_ms=None)  # fmt: skip
    return e


class Sender:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.epoch_offset = epoch_offset()  # the steps' clock: perf_counter() + this

    def put(self, ev: Any, urgent: bool = False) -> None:
        self.events.append(ev)


@pytest.fixture
def torch_of(monkeypatch):
    """A torch module whose c10d has the dumps given, with a process group made."""

    def make(**dumps: Any) -> types.SimpleNamespace:
        c10d = types.SimpleNamespace(**dumps)
        dist = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True)
        torch = types.SimpleNamespace(_C=types.SimpleNamespace(_distributed_c10d=c10d))
        monkeypatch.setitem(sys.modules, "torch", torch)
        monkeypatch.setitem(sys.modules, "torch.distributed", dist)
        monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "256")
        monkeypatch.delenv("PERFTOP_COMM", raising=False)
        return torch

    return make


def poller() -> tuple[CommPoller, Sender]:
    sender = Sender()
    state = types.SimpleNamespace(sender=sender, tracker=types.SimpleNamespace(thread=140211),
                                  internal_error=lambda where: pytest.fail(where))  # fmt: skip
    return CommPoller(state), sender


def records(sender: Sender) -> list[tuple[Any, ...]]:
    return [r for ev in sender.events if isinstance(ev, CollBatch) for r in ev.records]


def test_nccl_collectives_are_read_from_their_own_ring_beside_gloos(torch_of):
    now = time.time()
    nccl = [nccl_entry(0, 1, "broadcast", now - 5), nccl_entry(1, 2, "all_reduce", now - 4),
            nccl_entry(2, 3, "all_reduce", now - 3, done=False)]  # fmt: skip
    gloo = [gloo_entry(0, 1, now - 4.5)]
    torch_of(_dump_fr_trace=lambda c, s, a: pickle.dumps({"entries": gloo}),
             _dump_nccl_trace=lambda c, s, a: pickle.dumps({"entries": nccl}))  # fmt: skip
    p, sender = poller()
    p()
    (info,) = [e for e in sender.events if isinstance(e, CollInfo)]
    assert (info.buffer, info.why) == (256, "")
    got = [(r[0], r[1], r[2], r[3], r[6]) for r in records(sender)]
    assert got == [("cpu_group", 1, "barrier", 4, 1), ("default_pg", 1, "broadcast", 4096, 1),
                   ("default_pg", 2, "all_reduce", 4096, 1),
                   ("default_pg", 3, "all_reduce", 4096, 1)]  # fmt: skip
    (w,) = [e for e in sender.events if isinstance(e, CollWaiting)]
    assert (w.pg, w.seq, w.op) == ("default_pg", 3, "all_reduce") and w.waited_s >= 3.0

    # the rings go on apart: NCCL's overwrote two records before this read (ids 3 and 4)
    nccl[:] = [nccl_entry(5, 6, "all_reduce", now - 1), nccl_entry(6, 7, "all_reduce", now)]
    gloo.append(gloo_entry(1, 2, now - 0.5))
    sender.events.clear()
    p.next_t = 0.0
    p()
    (batch,) = [e for e in sender.events if isinstance(e, CollBatch)]
    assert [(r[0], r[1]) for r in batch.records] == [("cpu_group", 2), ("default_pg", 6),
                                                     ("default_pg", 7)]  # fmt: skip
    assert batch.lost == 2


def test_a_torch_whose_two_dumps_read_one_ring_gives_each_record_once(torch_of):
    """Later torches read NCCL's records through both names: no collective twice."""
    now = time.time()
    ring = [nccl_entry(0, 1, "all_reduce", now - 2), nccl_entry(1, 2, "all_reduce", now - 1)]
    dump = lambda c, s, a: pickle.dumps({"entries": ring})  # noqa: E731
    torch_of(_dump_fr_trace=dump, _dump_nccl_trace=dump)
    p, sender = poller()
    p()
    assert [r[1] for r in records(sender)] == [1, 2]
    ring.append(nccl_entry(2, 3, "all_reduce", now))
    p.next_t = 0.0
    p()
    assert [r[1] for r in records(sender)] == [1, 2, 3]
    assert all(ev.lost == 0 for ev in sender.events if isinstance(ev, CollBatch))


def test_a_cpu_build_reads_gloos_ring_alone(torch_of):
    now = time.time()
    torch_of(_dump_fr_trace=lambda c, s, a: pickle.dumps({"entries": [gloo_entry(0, 1, now)]}))
    p, sender = poller()
    p()
    assert [r[:3] for r in records(sender)] == [("cpu_group", 1, "barrier")]
    assert p.rings is not None and [r.name for r in p.rings] == ["fr"]


def test_records_are_stamped_on_the_steps_clock(torch_of):
    """c10d stamps a record with the system clock; the steps are perf_counter plus an
    offset read at the hook's start. The two drift apart (NTP slews one), and an offset
    read across a preemption is off by the preemption: either way a backward's all-reduce
    read on the system clock lands outside its backward. Here the steps' offset is 40 ms
    off the system clock: the record is moved onto the steps' clock, its wait is not."""
    now = time.time()
    ring = [nccl_entry(0, 1, "all_reduce", now - 3), nccl_entry(1, 2, "all_reduce", now - 2, False)]
    torch_of(_dump_nccl_trace=lambda c, s, a: pickle.dumps({"entries": ring}))
    p, sender = poller()
    sender.epoch_offset += 0.040
    p()
    created = [r[5] for r in records(sender)]
    assert created == pytest.approx([now - 3 + 0.040, now - 2 + 0.040], abs=0.002)
    (w,) = [e for e in sender.events if isinstance(e, CollWaiting)]
    assert w.t_created == pytest.approx(now - 2 + 0.040, abs=0.002)
    assert 2.0 <= w.waited_s < 2.5


def test_an_nccl_record_goes_with_its_time_on_the_gpu_once_retired(torch_of, monkeypatch):
    """With NCCL's timing on (the job's ``TORCH_NCCL_ENABLE_TIMING``), a record waits until the
    watchdog retires it with its time on the GPU (``duration_ms``), and those after it wait
    with it (sent in order); gloo's go at once. One still unretired 1 s after its launch
    goes without (a hang's record must reach the monitor)."""
    monkeypatch.setenv("TORCH_NCCL_ENABLE_TIMING", "1")
    now = time.time()
    nccl = [nccl_entry(0, 1, "all_reduce", now - 0.3),
            nccl_entry(1, 2, "all_reduce", now - 0.2, done=False),
            nccl_entry(2, 3, "all_reduce", now - 0.1)]  # fmt: skip
    gloo = [gloo_entry(0, 1, now - 0.25)]
    torch_of(_dump_fr_trace=lambda c, s, a: pickle.dumps({"entries": gloo}),
             _dump_nccl_trace=lambda c, s, a: pickle.dumps({"entries": nccl}))  # fmt: skip
    p, sender = poller()

    def read() -> list[tuple[Any, ...]]:
        sender.events.clear()
        p.next_t = 0.0
        p()
        return [(r[0], r[1], r[10]) for r in records(sender)]

    assert read() == [("cpu_group", 1, None), ("default_pg", 1, 0.00031)]
    nccl[1] = nccl_entry(1, 2, "all_reduce", now - 0.2)  # retired, timed
    assert read() == [("default_pg", 2, 0.00031), ("default_pg", 3, 0.00031)]
    nccl.append(nccl_entry(3, 4, "all_reduce", now - 1.5, done=False))  # still in flight
    assert read() == [("default_pg", 4, None)]
    assert all(ev.lost == 0 for ev in sender.events if isinstance(ev, CollBatch))
    nccl.append(nccl_entry(4, 5, "all_reduce", time.time(), done=False))
    assert read() == []  # held: just launched
    sender.events.clear()
    p(final=True)  # the job exits: what is held goes
    assert [(r[1], r[10]) for r in records(sender)] == [(5, None)]
