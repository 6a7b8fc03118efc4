"""The ring the step tracker writes steps into and the sender reads (hook/ring.py), in
both builds of the tracker: every step read once and in order, a full ring drops new
steps (counted from the index gap), the writer starts again from slot 0 once all is read,
a reader on another thread never sees a half-written or repeated step, a fork's child
starts empty with a ring of its own."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from perftop.hook import ring
from perftop.hook.steps import PHASED, RING_REC
from perftop.wire import STEP_RECORD, STEP_SOURCES


def _tracker(tracker_cls, cap: int):
    tr = tracker_cls(lambda step: pytest.fail(f"emitted {step}: the ring should take it"))
    tr.ring_cap = cap
    tr.ring_off = 1000.0
    return tr


def _push(tr, i: int, phases=None) -> None:
    tr.push(i, 10.0 + i, 10.5 + i, 0.1, 0.2, 0.05, phases, 3)


def _records(got: bytes) -> list[tuple]:
    return list(STEP_RECORD.iter_unpack(got))


def _indices(got: bytes) -> list[int]:
    return [r[1] for r in _records(got)]


def test_the_ring_holds_the_wires_record():
    assert STEP_RECORD.size == RING_REC


def test_steps_come_out_in_order_as_the_wires_records(tracker_cls):
    tr = _tracker(tracker_cls, 8)
    assert ring.buffered(tr) == 0 and ring.take(tr, 100) == b""
    for i in range(5):
        _push(tr, i, {"forward": 0.01 * i} if i == 3 else None)
    assert ring.buffered(tr) == 5
    got = ring.take(tr, 100)
    assert len(got) == 5 * RING_REC and ring.buffered(tr) == 0
    recs = _records(got)
    assert recs[0] == (os.getpid(), 0, 1010.0, 1010.5, 0.1, 0.2, 0.05, 3)  # epoch times
    assert STEP_SOURCES[recs[0][7]] == "optimizer"
    assert [r[7] for r in recs] == [3, 3, 3, 3 + PHASED, 3] and ring.phased(got)
    assert not ring.phased(got[: 3 * RING_REC])
    assert ring.phases(tr, 3) == {"forward": 0.03} and ring.phases(tr, 3) is None


def test_the_writer_starts_again_from_slot_0_once_all_is_read(tracker_cls):
    tr = _tracker(tracker_cls, 8)
    for i in range(3):
        _push(tr, i)
    assert _indices(ring.take(tr, 100)) == [0, 1, 2]
    _push(tr, 3)
    assert (tr.ring_r, tr.ring_w) == (0, 1)  # slot 0 again: its lines are warm
    assert _indices(ring.take(tr, 100)) == [3]


def test_a_full_ring_drops_new_steps_and_wraps_around_a_lagging_reader(tracker_cls):
    tr = _tracker(tracker_cls, 4)
    for i in range(6):  # 4 fit; 4 and 5 are dropped
        _push(tr, i)
    assert ring.buffered(tr) == 4
    assert _indices(ring.take(tr, 3)) == [0, 1, 2]  # a partial read: 3 is still there
    for i in range(6, 10):  # slots 0..2 free again: 6, 7, 8 fit (wrapping), 9 does not
        _push(tr, i)
    assert _indices(ring.take(tr, 100)) == [3, 6, 7, 8]
    assert ring.buffered(tr) == 0


def test_discard_counts_what_was_left(tracker_cls):
    tr = _tracker(tracker_cls, 8)
    for i in range(5):
        _push(tr, i, {"x": 1.0})
    assert ring.discard(tr) == 5 and ring.buffered(tr) == 0 and not tr.ring_phases


def test_no_ring_emits_tuples_as_before(tracker_cls):
    got: list = []
    tr = tracker_cls(got.append)
    tr.push(7, 1.0, 2.0, 0.1, 0.2, 0.3, None, 3)
    assert got == [(7, 1.0, 2.0, 0.1, 0.2, 0.3, None, "optimizer")]
    assert type(got[0][0]) is int


def test_a_reader_thread_sees_every_step_once_whole_and_in_order(tracker_cls):
    """The sender's thread reads while the training thread writes (both under the GIL,
    switching at any bytecode in the plain build): no step torn, repeated or lost
    uncounted, and the writer's restarts from slot 0 never cross a read."""
    tr = _tracker(tracker_cls, 64)
    n, seen, stop = 200_000, [], threading.Event()

    def reader() -> None:
        while not stop.is_set() or ring.buffered(tr):
            for _pid, i, t0, t1, *_ in _records(ring.take(tr, 50)):
                assert (t0, t1) == (1010.0 + i, 1010.5 + i), "a torn step"
                seen.append(i)

    t = threading.Thread(target=reader)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over as often as it goes: inside a take too
    t.start()
    try:
        for i in range(n):
            _push(tr, i)
    finally:
        stop.set()
        t.join(60)
        sys.setswitchinterval(switch)
    assert seen == sorted(set(seen)), "repeated or out of order"
    assert seen[-1] <= n - 1 and len(seen) > 2 * 64  # the ring went round; drops are gaps


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_starts_empty_with_a_ring_of_its_own(tracker_cls):
    tr = _tracker(tracker_cls, 8)
    _push(tr, 0)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what a DataLoader worker's reset does, then steps of its own
        try:
            tr.reset()
            for i in range(100, 103):
                _push(tr, i)
            os.write(w, repr(_indices(ring.take(tr, 100))).encode())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(r, 1000) == b"[100, 101, 102]"
    assert _indices(ring.take(tr, 100)) == [0]  # the parent's step, untouched
