"""The sender without a thread of its own while the job's process has no other (solo.py):
a single-threaded job stays single-threaded (glibc keeps its lock-free fast paths), every
step still arrives, the thread takes over once the job has another, and the training
thread's own sends never wait, lose nothing uncounted, and survive an interrupt."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from perftop.events import Dropped, Hello, Step
from perftop.hook.sender import Sender
from perftop.hook.solo import single_threaded_flag
from perftop.recording import read_events
from perftop.wire import decode_frame
from perftop.wire_stream import FrameReader
from tests.helpers import WORKLOADS, run_and_report
from tests.test_sender import Listener, _hello

pytestmark = pytest.mark.skipif(
    single_threaded_flag() is None, reason="glibc's __libc_single_threaded (Linux, glibc >= 2.32)"
)
JOB = str(WORKLOADS / "solo_job.py")


def _job(tmp_path, *args: str) -> tuple[dict, dict]:
    proc, report = run_and_report(tmp_path, sys.executable, JOB, *args)
    assert proc.returncode == 0, proc.stderr
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    return own, report


def test_a_single_threaded_job_stays_single_threaded_and_every_step_arrives(tmp_path):
    own, report = _job(tmp_path, "400")
    assert own["tasks"] == 1 and own["single"], own  # no perftop-sender thread, ever
    assert own["threads"] == ["MainThread"]
    assert report["steps"]["count"] == own["steps"] == 400


def test_the_sender_thread_takes_over_once_the_job_has_another_thread(tmp_path):
    own, report = _job(tmp_path, "400", "thread")
    assert "perftop-sender" in own["threads"] and "job-own" in own["threads"], own
    assert report["steps"]["count"] == own["steps"] == 400


def test_a_job_with_a_thread_sends_its_first_steps_soon(tmp_path):
    """A job with a thread of its own before its first step: the sender's thread sends, and
    its first sends come as soon as the training thread's would (20 ms after it starts, not
    after a 0.25 s sleep). A short process (a hogwild trainer's 0.1-0.4 s of steps) had
    connected only at its exit (24 of 38 trainers), whose 0.1 s then held its whole stream:
    here 40 steps of ~2.5 ms, then 1 s idle, and its hello came before its last step."""
    own, report = _job(tmp_path, "40", "thread-first")
    assert "perftop-sender" in own["threads"] and report["steps"]["count"] == own["steps"] == 40
    events = list(read_events(tmp_path / "r.perftop"))
    (hello,) = [e for e in events if isinstance(e, Hello)]
    steps = sorted((e for e in events if isinstance(e, Step)), key=lambda e: e.index)
    assert hello.t < steps[-1].t1, (hello.t - steps[0].t0, steps[-1].t1 - steps[0].t0)


@pytest.mark.parametrize("at", [10, 150])
def test_a_hang_in_a_single_threaded_job_is_seen_and_named_by_its_step(tmp_path, at):
    """Steps of ~2.5 ms, then a 4 s hang in step ``at``. At 10 (~25 ms after the first step,
    which is the slowest and ends past the first send's time): the steps it buffered reached
    the monitor before the hang, five at least, a median to call the hang a stall by (the
    first sends come sooner, and stay 20 ms apart until eight steps went out); before, the
    first send took the first step alone and the next, 40 ms later, came after the hang
    began: no stall (in two runs of six here). At 150: the steps it ended since its last
    send (up to 0.25 s of them) came only after the hang, and the stall, captured as the
    step after the last one sent, is the step that hung once they came (the report reads
    the whole recording)."""
    own, report = _job(tmp_path, "200", f"hang:{at}")
    assert own["single"] and report["steps"]["count"] == own["steps"] == 200
    # (a loaded host may also catch the wind-down after the last step as a later "stall")
    stalls = [s for s in report["stalls"] if s["step"] <= at]
    assert len(stalls) == 1, report["stalls"]
    s = stalls[0]
    # how long it had run when captured: 2 s after the last step sent ended, which is up
    # to 0.25 s before the hung step began, and the dump's own time (on a loaded CI host
    # up to a second: the capture of a 3 s hang was over as it ended), within the hang
    assert s["step"] == at and 1.5 <= s["stalled_s"] < 4.0, s
    main = next(p for p in s["processes"] if p["role"] == "main")
    assert main["frames"][0]["function"] == "hang_here"


SOLO_WRITER = r"""
import json, os, sys, time
from perftop.events import Hello
from perftop.hook.sender import Sender
s = Sender(sys.argv[1], lambda: Hello(time.time(), os.getpid(), os.getppid(), "h", ()))
assert s.probe()
s.start()
solo = s.solo
n, worst, pumps, end = 0, 0.0, 0, time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:  # a training thread that ends a step every ~2 us
    s.steps.append((n, 1.0 + n, 1.0 + n, 0.0, 0.0, 0.0, None, "optimizer"))
    n += 1
    if time.perf_counter() >= s.flush_at:
        t0 = time.perf_counter()
        s.pump()
        worst, pumps = max(worst, time.perf_counter() - t0), pumps + 1
s.close()
print(json.dumps({"n": n, "solo": solo, "worst": worst, "pumps": pumps,
                  "dropped": s.dropped, "tasks": len(os.listdir("/proc/self/task"))}))
"""


def test_solo_sends_never_wait_for_a_monitor_that_stops_reading(tmp_path):
    """The monitor accepts and then reads nothing while the job sends for 1.5 s: the
    socket fills, the training thread's sends return at once, the bounded deque drops
    the oldest steps and counts them. Read afterwards, the stream is whole: the steps it
    holds are in order, and with the drops they add up to every step the job made."""
    path = str(tmp_path / "s")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen()
    job = subprocess.Popen([sys.executable, "-c", SOLO_WRITER, path, "1.5"],
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    conn, _ = srv.accept()
    out, _ = job.communicate(timeout=60)  # no read until the job is done
    got = json.loads(out)
    assert got["solo"] and got["tasks"] == 1, got
    assert got["pumps"] >= 4 and got["worst"] < 0.05, got  # never waited on the socket
    events, reader = [], FrameReader()
    conn.settimeout(5)
    while data := conn.recv(1 << 20):
        for payload in reader.feed(data):
            events.extend(decode_frame(payload)[0])
    assert isinstance(events[0], Hello)
    idx = [e.index for e in events if isinstance(e, Step)]
    assert idx == sorted(set(idx)) and idx, idx[:5]  # in order, none twice
    assert got["dropped"] > 0 and len(idx) + got["dropped"] == got["n"], (len(idx), got)
    drops = [e.total for e in events if isinstance(e, Dropped)]
    assert drops == sorted(drops) and all(d <= got["dropped"] for d in drops)


class _Interrupted(socket.socket):
    """A real socket whose send is interrupted (Ctrl-C) after it sent part of the data."""

    def send(self, data, *flags):  # type: ignore[override]
        super().send(bytes(data)[: len(data) // 2], *flags)
        raise KeyboardInterrupt


def test_an_interrupt_in_the_training_threads_send_restarts_the_stream_cleanly(tmp_path):
    """Ctrl-C lands in a send on the training thread: the interrupt reaches the job as
    it would anyway, the connection whose frame was cut is dropped, and the next send
    starts a new one (magic, hello) that the monitor reads whole."""
    lst = Listener(tmp_path / "s")
    s = Sender(str(tmp_path / "s"), _hello, interval=3600)
    s.started = True  # no thread: this test sends itself
    assert s.probe()
    s._connect(None)  # greeted on the probe's connection
    for i in range(50):
        s.steps.append((i, 1.0, 1.0, 0.0, 0.0, 0.0, None, "optimizer"))
    s._sock = _Interrupted(fileno=s._sock.detach())
    with pytest.raises(KeyboardInterrupt):
        s.drain(nowait=True)
    assert s._sock is None and s._tail == b""
    s._next_connect = 0.0
    for i in range(50, 60):
        s.steps.append((i, 1.0, 1.0, 0.0, 0.0, 0.0, None, "optimizer"))
    s.drain(nowait=True)
    deadline = time.monotonic() + 10
    while sum(isinstance(e, Step) for e in lst.events) < 10 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sum(isinstance(e, Hello) for e in lst.events) == 2  # one per connection
    steps = [e.index for e in lst.events if isinstance(e, Step)]
    assert steps == list(range(50, 60))  # the cut batch is lost (counted), nothing garbled
    assert s.dropped == 50


def test_plain_and_phased_steps_keep_their_order_and_what_fell_out_is_counted(
    tmp_path, tracker_cls
):
    """A batch of plain steps is packed in one go; one with a step that has phases goes
    item by item, in order, each in its own form. In a full deque the oldest fall out:
    the sender counts them from the indices."""
    lst = Listener(tmp_path / "s")
    s = Sender(str(tmp_path / "s"), _hello, capacity=10, interval=3600)
    s.started = True
    tr = tracker_cls(s.steps.append)
    tr.settled = True
    tr.explicit(1.0)  # the first step starts here
    for i in range(25):
        if i % 4 == 0:
            tr.phase("fwd", 1.0 + i, 1.5 + i)
        tr.explicit(2.0 + i)
    s.drain()
    for i in range(25, 30):  # a batch of plain steps only
        tr.explicit(2.0 + i)
    s.drain()
    deadline = time.monotonic() + 10
    while sum(isinstance(e, Step) for e in lst.events) < 15 and time.monotonic() < deadline:
        time.sleep(0.02)
    steps = [e for e in lst.events if isinstance(e, Step)]
    assert [e.index for e in steps] == list(range(15, 30))
    assert [bool(e.phases) for e in steps] == [i % 4 == 0 and i < 25 for i in range(15, 30)]
    assert steps[0].t0 > 1e9 and steps[0].t1 - steps[0].t0 == pytest.approx(1.0)
    assert [e.total for e in lst.events if isinstance(e, Dropped)] == [15]
    assert s.dropped == 15


DEAD_MONITOR = r"""
import os, signal, sys, time
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as a script piped into `head` sets it
from perftop.events import Hello
from perftop.hook.sender import Sender
s = Sender(sys.argv[1], lambda: Hello(time.time(), os.getpid(), os.getppid(), "h", ()),
           interval=0.02)
assert s.probe()
for n in range(400):  # ~1.2 s of steps; the monitor dies in the first 0.3 s
    s.steps.append((n, 1.0 + n, 1.0 + n, 0.0, 0.0, 0.0, None, "optimizer"))
    s.start()
    if time.perf_counter() >= s.flush_at:
        s.pump()
    time.sleep(0.003)
s.close()
print("alive", s.dropped, s.solo)
"""


@pytest.mark.parametrize("thread", ["", "1"], ids=["solo", "thread"])
def test_a_monitor_that_dies_never_kills_a_job_that_takes_sigpipe(tmp_path, thread):
    """The monitor is killed (its end of the socket closed) while the job sends: the
    job, whose SIGPIPE is at its default, runs to its end and exits 0; what it could not
    send is counted. Before MSG_NOSIGNAL the next send killed it (exit 141 in a shell)."""
    path = str(tmp_path / "s")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen()
    env = {**os.environ, "PERFTOP_SENDER_THREAD": thread}
    job = subprocess.Popen([sys.executable, "-c", DEAD_MONITOR, path], env=env,
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    conn, _ = srv.accept()
    time.sleep(0.3)
    conn.close()  # the monitor is gone
    srv.close()
    out, _ = job.communicate(timeout=60)
    assert job.returncode == 0, job.returncode
    _, dropped, solo = out.split()
    assert int(dropped) > 0 and solo == ("True" if not thread else "False")
