"""The hub: late subscribers start complete, slow sinks never hold it up, and a flood from
several real senders keeps its memory flat with every dropped event counted."""

from __future__ import annotations

import socket
import threading
import time

from perftop.events import Hello, JobStart, LoaderInfo, Note, SessionStart, Step
from perftop.model import Session
from perftop.monitor.hub import Hub, _rss
from perftop.monitor.server import Server
from perftop.recording import RecordingWriter
from perftop.report.build import build_report, session_from_file
from perftop.wire import MAGIC, Frame, encode_frame


def _wait(cond, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end and not cond():
        time.sleep(0.02)
    return cond()


def _steps(pid, start, n, t0=1000.0):
    return [Step(pid, i, t0 + i * 0.1, t0 + i * 0.1 + 0.09, 0.01) for i in range(start, start + n)]


def test_a_recording_started_mid_run_reports_on_its_own(tmp_path):
    hub = Hub(refresh_s=0.05).start()
    hub.submit(SessionStart(1000.0, ("python", "train.py"), "/w", "h", 1, "0", record_path="a"))
    hub.submit(JobStart(1000.0, 7, ("python", "train.py")))
    hub.submit(Hello(1000.0, 7, 1, "h", ("train.py",)), LoaderInfo(1000.0, 7, 0, 2, 4, False, 2, False, ((0, 8), (1, 9))))  # fmt: skip
    hub.submit(*_steps(7, 0, 30))
    rec = RecordingWriter(tmp_path / "late.perftop")
    hub.subscribe(rec, buffered=False, record_path=str(rec.path))
    hub.submit(*_steps(7, 30, 10))
    hub.unsubscribe(rec)
    hub.submit(*_steps(7, 40, 5))  # after it stopped: not in the file
    hub.stop()
    assert rec.closed
    rep = build_report(session_from_file(str(rec.path)).snapshot(window=None))
    assert rep["command"] == ["python", "train.py"]
    assert rep["record_path"] == str(rec.path)  # its own name, not the first recording's
    assert rep["steps"]["count"] == 40  # the history before it started, then live
    assert rep["loaders"][0]["workers"] == [{"worker_id": 0, "pid": 8}, {"worker_id": 1, "pid": 9}]
    assert {p["role"] for p in rep["processes"]} == {"main", "worker"}


def test_history_is_bounded_but_the_header_stays(tmp_path):
    hub = Hub()
    hub.header.history_limit = 20_000
    hub.start()
    hub.submit(SessionStart(1.0, ("x",), "/", "h", 1, "0"), Hello(1.0, 7, 1, "h", ("x",)))
    for k in range(200):
        hub.submit(*_steps(7, k * 10, 10))
    rec = RecordingWriter(tmp_path / "late.perftop")
    hub.subscribe(rec, buffered=False)
    hub.stop()
    snap = session_from_file(str(rec.path)).snapshot(window=None)
    assert snap.meta.command == ("x",) and [t.pid for t in snap.trainers] == [7]
    assert 0 < snap.steps.count < 2000  # bounded history, the newest steps
    assert snap.steps.recent[-1].index == 1999
    assert hub.header.history_dropped > 0


class _Stuck:
    """A sink that blocks on its first write until released (a viewer that stopped reading)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.frames = 0

    def write_frame(self, frame: Frame) -> None:
        self.release.wait(30)
        self.frames += 1

    def write_events(self, events) -> None:
        pass

    def tick(self, now: float) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_stuck_sink_never_blocks_ingest_or_the_recording(tmp_path):
    hub = Hub().start()
    stuck = _Stuck()
    handle = hub.subscribe(stuck)
    rec = RecordingWriter(tmp_path / "r.perftop")
    hub.subscribe(rec, buffered=False)
    big = "x" * 100_000
    t0 = time.monotonic()
    for i in range(200):  # 20 MB: more than a sink's buffer
        hub.submit(Note(float(i), "info", "t", big))
    assert _wait(lambda: hub.events_in >= 200)
    assert time.monotonic() - t0 < 10
    assert handle.dropped > 0  # the stuck sink dropped and counted
    stuck.release.set()
    hub.stop()
    notes = [n for n in session_from_file(str(rec.path)).snapshot().notes if n.source == "t"]
    assert len(notes) == 200  # the recording has every one


def test_flood_from_several_senders_stays_flat_and_counts_every_drop(tmp_path):
    """The model falls behind (a slow snapshot subscriber on the hub's thread); 4 real
    sockets flood it. Queued frames never pass the bound, memory stays flat, and events
    applied + events dropped = events sent."""
    session = Session()
    hub = Hub(session, refresh_s=0.0, max_frames=64, max_bytes=4 << 20)
    hub.snapshot_subscribers.append(lambda s: time.sleep(0.05))  # a slow consumer
    srv = Server(hub.submit_frame, tmp_path / "s.sock").start()
    hub.start()
    senders, frames_each, per_frame = 4, 600, 200
    frame = encode_frame(_steps(11, 0, per_frame))
    rss0 = _rss()
    peak = {"queued": 0, "rss": rss0}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak["queued"] = max(peak["queued"], hub.queued())
            peak["rss"] = max(peak["rss"], _rss())
            time.sleep(0.01)

    def send() -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(srv.path))
        s.sendall(MAGIC)
        for _ in range(frames_each):
            s.sendall(frame)
        s.close()

    w = threading.Thread(target=watch)
    w.start()
    threads = [threading.Thread(target=send) for _ in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    sent = senders * frames_each * per_frame
    assert _wait(lambda: hub.hook_events_in + hub.dropped_events >= sent, 60)
    time.sleep(1.2)  # one more MonitorStats carries the final count
    done.set()
    w.join()
    srv.close()
    hub.stop()
    assert hub.dropped_events > 0 and hub.dropped_events % per_frame == 0
    assert hub.hook_events_in + hub.dropped_events == sent  # nothing lost uncounted
    assert peak["queued"] <= 64
    # 480,000 decoded steps held in a queue would take well over 100 MB.
    assert peak["rss"] - rss0 < 60 << 20
    assert hub.latest is not None and hub.latest.meta.monitor_dropped == hub.dropped_events


def test_the_header_shows_the_monitors_drops_beside_the_hooks():
    from perftop.model.snapshot import Meta, Snapshot
    from perftop.tui.widgets.header import HeaderBar

    bar = HeaderBar()
    quiet = "\n".join(
        t.plain for t in bar.compose_text(Snapshot(meta=Meta(dropped_events=0))).renderables
    )
    assert "dropped 0" in quiet and "+perftop" not in quiet
    busy = "\n".join(
        t.plain
        for t in bar.compose_text(
            Snapshot(meta=Meta(dropped_events=12, monitor_dropped=4000))
        ).renderables
    )
    assert "dropped 12 +perftop 4,000" in busy
