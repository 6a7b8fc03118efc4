"""Snapshots to a TUI in a process of its own: a real pipe, a real child process."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time

from perftop.monitor.snapshot_pipe import SnapshotSender, lean, read_snapshots
from tests.tui.fakes import snapshot


def a_fleet_snapshot():
    """The fake snapshot with four ranks, each with its own recent steps (as a fleet's
    merged snapshot has them); the shown steps are the first rank's."""
    snap = snapshot()
    ranks = tuple(dataclasses.replace(snap.steps, pid=100 + r, rank=r) for r in range(4))
    return dataclasses.replace(snap, ranks=ranks, steps=ranks[0])


def reading() -> tuple[SnapshotSender, list, threading.Thread]:
    """A sender on a real pipe, and a thread reading the other end into a list."""
    r, w = os.pipe()
    got: list = []
    reader = threading.Thread(target=lambda: got.extend(read_snapshots(r)))
    reader.start()
    return SnapshotSender(w), got, reader


def test_lean_keeps_what_the_tui_draws_and_drops_each_ranks_window() -> None:
    snap = a_fleet_snapshot()
    out = lean(snap)
    assert out.steps.recent == snap.steps.recent  # the chart of the shown process
    assert all(r.recent == () for r in out.ranks)
    strip = [dataclasses.replace(r, recent=()) for r in snap.ranks]
    assert list(out.ranks) == strip  # every other figure unchanged
    assert dataclasses.replace(out, ranks=snap.ranks) == snap
    plain = dataclasses.replace(snapshot(), ranks=())  # no ranks: passed through as it is
    assert lean(plain) is plain


def test_snapshots_cross_a_real_pipe_and_the_reader_sees_the_end() -> None:
    sender, got, reader = reading()
    snaps = [dataclasses.replace(a_fleet_snapshot(), events=i) for i in range(3)]
    for s in snaps:
        sender.send(s)
        time.sleep(0.2)  # each one sent before the next
    sender.close()
    reader.join(10)
    assert not reader.is_alive()  # the end of the stream ends the reader
    assert got == [lean(s) for s in snaps]
    assert sender.sent == 3 and sender.skipped == 0 and not sender.gone.is_set()


def test_a_slow_reader_gets_the_newest_snapshot_and_the_sender_never_waits() -> None:
    r, w = os.pipe()
    sender = SnapshotSender(w)
    big = a_fleet_snapshot()  # larger than the pipe's buffer: the writer blocks on it
    t0 = time.perf_counter()
    for i in range(50):
        sender.send(dataclasses.replace(big, events=i))
    assert time.perf_counter() - t0 < 0.5  # send() only hands over
    time.sleep(0.5)
    got = []
    reader = threading.Thread(target=lambda: got.extend(read_snapshots(r)))
    reader.start()
    sender.close()
    reader.join(10)
    assert got[-1].events == 49  # the newest arrives
    assert len(got) < 50 and sender.skipped == 50 - len(got)


def test_a_reader_gone_is_noted_not_raised() -> None:
    r, w = os.pipe()
    sender = SnapshotSender(w)
    os.close(r)
    sender.send(a_fleet_snapshot())
    assert sender.gone.wait(5)
    sender.send(a_fleet_snapshot())  # after it: still no error
    sender.close()


def test_a_child_reads_them_as_the_tui_process_does() -> None:
    """The child's side in another interpreter, through an inherited descriptor."""
    r, w = os.pipe()
    code = (
        "import sys\n"
        "from perftop.monitor.snapshot_pipe import read_snapshots\n"
        "for s in read_snapshots(int(sys.argv[1])):\n"
        "    print(s.events, len(s.ranks), len(s.steps.recent), flush=True)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(r)], pass_fds=(r,), stdout=subprocess.PIPE, text=True
    )
    os.close(r)
    sender = SnapshotSender(w)
    snap = a_fleet_snapshot()
    sender.send(dataclasses.replace(snap, events=7))
    sender.close()
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 0
    assert out.split() == ["7", "4", str(len(snap.steps.recent))]


def test_a_snapshot_that_cannot_be_pickled_is_skipped_and_the_next_one_goes() -> None:
    sender, got, reader = reading()
    bad = dataclasses.replace(snapshot(), output=(lambda: None,))  # type: ignore[arg-type]
    sender.send(bad)
    time.sleep(0.3)
    sender.send(dataclasses.replace(snapshot(), events=5))
    sender.close()
    reader.join(10)
    assert [s.events for s in got] == [5] and sender.failed == 1
