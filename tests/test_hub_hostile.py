"""What a hook's socket carries is not trusted, and a fault of the model never stops the
hub: a frame of steps with a time that is not a finite number is rejected on arrival (one
crashed the hub's thread: the screen froze, the recording stopped, the job ran on unseen),
and an event or a snapshot the session model raises on is said once while ingest, the
recording and the subscribers go on."""

from __future__ import annotations

import socket
import time
import zlib
from typing import Any

from perftop.events import Hello, Note, SessionStart, Step
from perftop.model import Session
from perftop.model.session import default_reducers
from perftop.monitor.hub import Hub
from perftop.monitor.server import Server
from perftop.recording import RecordingWriter, read_events
from perftop.wire import HEADER, KIND_JSON, MAGIC, STEP_RECORD, encode_frame, encode_steps_frame

T0 = 1_790_000_000.0


def _wait(cond: Any, timeout: float = 10.0) -> bool:
    end = time.time() + timeout
    while time.time() < end and not cond():
        time.sleep(0.02)
    return bool(cond())


def _records(pid: int, start: int, n: int, bad: float | None = None) -> list[bytes]:
    out = []
    for i in range(start, start + n):
        t1 = T0 + i * 0.1 + 0.09
        if bad is not None and i == start + n // 2:
            t1 = bad
        out.append(STEP_RECORD.pack(pid, i, T0 + i * 0.1, t1, 0.01, 0.03, 0.002, 3))
    return out


def _hook(hub: Hub, tmp_path: Any) -> tuple[Server, socket.socket]:
    """The hub started behind a real server, and a hook's connection to it, hello sent."""
    srv = Server(hub.submit_frame, tmp_path / "s.sock").start()
    hub.start()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(srv.path))
    s.sendall(MAGIC + encode_frame([SessionStart(T0, ("x",), "/", "h", 1, "0"),
                                    Hello(T0, 7, 1, "h", ("x",))]))  # fmt: skip
    return srv, s


def _hung_up(hub: Hub, srv: Server, s: socket.socket, steps: int, rejected: int) -> None:
    """The hook hangs up: every good step applied, each bad frame refused, none failed."""
    s.close()
    assert _wait(lambda: hub.latest is not None and hub.latest.steps.count == steps)
    assert srv.rejected_frames == rejected
    assert hub.model_errors == 0
    srv.close()
    hub.stop()


def test_a_step_frame_with_a_time_that_is_not_a_number_is_rejected(tmp_path):
    hub = Hub(refresh_s=0.05)
    rec = RecordingWriter(tmp_path / "r.perftop")
    hub.subscribe(rec, buffered=False)
    srv, s = _hook(hub, tmp_path)
    s.sendall(encode_steps_frame(_records(7, 0, 40)))
    for bad in (float("inf"), float("nan"), float("-inf")):
        s.sendall(encode_steps_frame(_records(7, 40, 20, bad)))
    s.sendall(encode_steps_frame(_records(7, 40, 30)))
    _hung_up(hub, srv, s, steps=70, rejected=3)
    steps = [e for e in read_events(rec.path) if isinstance(e, Step)]
    assert [e.index for e in steps] == list(range(70))


class Brittle:
    """A reducer with a bug: it raises on a Note that says "boom", and in snapshots
    once it has seen one."""

    handles = (Note,)

    def __init__(self) -> None:
        self.broken = False

    def apply(self, ev: Any) -> None:
        if "boom" in ev.text:
            self.broken = True
            raise ValueError("a reducer's bug")

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        if self.broken and len(parts) < 100:
            self.broken = False  # the next snapshot works again
            raise KeyError("snapshot bug")


def test_a_model_fault_is_said_once_and_ingest_goes_on(tmp_path):
    problems: list[str] = []
    hub = Hub(Session([*default_reducers(), Brittle()]), refresh_s=0.05,
              on_problem=problems.append)  # fmt: skip
    rec = RecordingWriter(tmp_path / "r.perftop")
    hub.subscribe(rec, buffered=False)
    seen: list[int] = []
    hub.snapshot_subscribers.append(lambda snap: seen.append(snap.steps.count))
    hub.start()
    hub.submit(SessionStart(T0, ("x",), "/", "h", 1, "0"), Hello(T0, 7, 1, "h", ("x",)))
    hub.submit(*[Step(7, i, T0 + i, T0 + i + 0.5, 0.1) for i in range(10)])
    hub.submit(Note(T0 + 10, "info", "job", "boom"), Note(T0 + 10, "info", "job", "boom"))
    hub.submit(*[Step(7, i, T0 + i, T0 + i + 0.5, 0.1) for i in range(10, 25)])
    assert _wait(lambda: bool(seen) and seen[-1] == 25)
    hub.stop()
    assert hub.model_errors >= 3  # two events and a snapshot
    assert len(problems) == 1 and "session model failed on a Note event" in problems[0]
    assert "ValueError: a reducer's bug" in problems[0]
    kept = list(read_events(rec.path))
    assert sum(isinstance(e, Step) for e in kept) == 25
    assert sum(isinstance(e, Note) and e.text == "boom" for e in kept) == 2
    assert any(isinstance(e, Note) and "session model failed" in e.text for e in kept)


def test_a_live_event_not_of_its_types_is_rejected(tmp_path):
    """JSON allows NaN and Infinity, and a string stands where a time should: a live event
    is checked against its types as a recording's reader checks it."""
    hub = Hub(refresh_s=0.05)
    srv, s = _hook(hub, tmp_path)
    for bad in (b'[["step",7,0,1.0,NaN,0.1]]', b'[["step",7,0,"a",2.0,0.1]]',
                b'[["step",7,0,1.0,Infinity,0.1]]', b'[["note",1.0,"info",["x"],"y"]]'):  # fmt: skip
        s.sendall(HEADER.pack(len(bad), zlib.crc32(bad), KIND_JSON) + bad)
    s.sendall(encode_frame([Step(7, i, T0 + i, T0 + i + 0.5, 0.1) for i in range(5)]))
    _hung_up(hub, srv, s, steps=5, rejected=4)
