"""The hook's sender: bounded, never blocking, fork-safe, counting what it drops."""

from __future__ import annotations

import os
import socket
import threading
import time

from perftop.events import Dropped, Hello, Note, Step
from perftop.hook.sender import Sender
from perftop.wire import FrameReader, decode_frame


def _hello() -> Hello:
    return Hello(time.time(), os.getpid(), os.getppid(), "h", ())


class Listener:
    """A real Unix socket that collects every event it receives."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen()
        self.events: list = []
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
                    self.events.extend(decode_frame(p)[0])


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
