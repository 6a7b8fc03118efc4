"""The hook's sender: bounded, never blocking, fork-safe, counting what it drops."""

from __future__ import annotations

import os
import socket
import threading
import time

from perftop.events import Dropped, Hello, Note, Step
from perftop.hook.sender import FIRST_S, INTERVAL_S, Sender
from perftop.wire import decode_frame
from perftop.wire_stream import FrameReader


def _hello() -> Hello:
    return Hello(time.time(), os.getpid(), os.getppid(), "h", ())


class Listener:
    """A real Unix socket that collects every event it receives."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen()
        self.events: list = []
        self.step_frames: list[float] = []  # when each frame of steps arrived (monotonic)
        self.accept = True
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            reader = FrameReader()
            while data := conn.recv(65536):
                for p in reader.feed(data):
                    events = decode_frame(p)[0]
                    if any(isinstance(e, Step) for e in events):
                        self.step_frames.append(time.monotonic())
                    self.events.extend(events)


def test_events_arrive_with_hello_first(tmp_path):
    lst = Listener(tmp_path / "s")
    s = Sender(str(tmp_path / "s"), _hello, interval=0.01)
    for i in range(100):
        s.put((i, 1.0, 2.0, 0.1, 0.2, 0.3, None, "optimizer"))
    s.close()
    time.sleep(0.2)
    assert isinstance(lst.events[0], Hello)
    steps = [e for e in lst.events if isinstance(e, Step)]
    assert [e.index for e in steps] == list(range(100))
    assert steps[0].t1 - steps[0].t0 == 1.0 and steps[0].t0 > 1e9  # perf stamps -> epoch
    assert s.dropped == 0


def test_full_buffer_drops_and_counts_then_reports(tmp_path):
    s = Sender(str(tmp_path / "s"), _hello, capacity=10, interval=3600)
    s.started = True  # keep the thread off: nothing drains
    for i in range(25):
        s.put(Note(1.0, "info", "t", str(i)))
    assert len(s.buf) == 10 and s.dropped == 15
    lst = Listener(tmp_path / "s")
    s.drain()
    time.sleep(0.2)
    drops = [e for e in lst.events if isinstance(e, Dropped)]
    assert drops and drops[-1].total == 15
    assert len([e for e in lst.events if isinstance(e, Note)]) == 10


def test_put_never_blocks_without_a_listener(tmp_path):
    s = Sender(str(tmp_path / "nobody"), _hello, interval=0.01)
    t0 = time.perf_counter()
    for i in range(100_000):
        s.put((i, 0.0, 0.0, 0.0, 0.0, 0.0, None, ""))
    per_put = (time.perf_counter() - t0) / 100_000
    assert per_put < 20e-6  # generous: a deque append plus a length check
    time.sleep(0.1)
    s.close(timeout=0.2)
    assert s.dropped > 0


def test_forked_child_starts_empty(tmp_path):
    lst = Listener(tmp_path / "s")
    s = Sender(str(tmp_path / "s"), _hello, interval=3600)
    s.started = True
    for i in range(5):
        s.put(Note(1.0, "info", "parent", str(i)))
    pid = os.fork()
    if pid == 0:  # the child: as a DataLoader worker would be
        code = 0 if (len(s.buf) == 0 and s.pid == os.getpid() and not s.started) else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    s.drain()
    time.sleep(0.2)
    assert len([e for e in lst.events if isinstance(e, Note)]) == 5  # sent once, by the parent


def test_steps_of_a_busy_training_thread_go_out_in_few_batches(tmp_path):
    """The sender batches by time: a training thread that never waits (pure Python between
    steps, holding the GIL) has its steps sent live, but in at most 4 batches a second
    (each wake costs that thread a GIL hand-off), every step exactly once."""
    lst = Listener(tmp_path / "s")
    s = Sender(str(tmp_path / "s"), _hello)  # the default interval, as in a job
    assert s.probe()
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < 2.0:  # ~2 s of 0.05-0.5 ms steps
        sum(range(6000))
        t = time.perf_counter()
        s.steps.append((n, t, t, 0.0, 0.0, 0.0, None, "optimizer"))  # as the tracker emits
        s.start()
        n += 1
    live = [t for t in lst.step_frames if t <= time.monotonic()]
    elapsed = time.monotonic() - start
    s.close()
    deadline = time.monotonic() + 30
    while sum(isinstance(e, Step) for e in lst.events) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [e.index for e in lst.events if isinstance(e, Step)] == list(range(n))
    assert s.dropped == 0
    # one wake sends its steps in frames of MAX_BATCH, back to back: count the wakes. The
    # first come sooner (FIRST_S, then twice as long each time up to the interval: the
    # monitor needs a job's first steps early); from then on at most 4 a second.
    wakes = [t for i, t in enumerate(live) if i == 0 or t - live[i - 1] > 0.05]
    ramp, gap = 0.0, FIRST_S
    while gap < INTERVAL_S:
        ramp, gap = ramp + gap, 2 * gap
    steady = [t for t in wakes if t - start > ramp + 0.1]
    assert 2 <= len(steady) <= 4 * (elapsed - ramp) + 1, (len(steady), len(live), n, elapsed)
    assert len(wakes) - len(steady) <= 6, wakes  # the ramp: 0.02, 0.04, 0.08, 0.16 s apart
    assert INTERVAL_S <= 0.25  # the most an event waits for the next batch
