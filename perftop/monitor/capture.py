"""Asking the job for an op capture (issue 31), on the monitor's side.

:class:`CaptureDesk` is the hub's: it sends a :class:`CaptureAsk` frame to every training
process's hook (the socket server's ``send_to_trainers``), records the ``asked`` state (or
``refused`` at once when no hook is there), and hands each capture's later events to whoever
asked. :func:`serve_control` answers a ``CTRL_MAGIC`` connection of the socket (``perftop
trace``, an attached viewer with ``--allow-control``): it reads one ask, asks the hub, and
streams that capture's :class:`CaptureState` / :class:`CaptureOps` back until every process
asked has answered. :func:`request` is that connection's client side.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from perftop.errors import PerftopError
from perftop.events import CaptureAsk, CaptureOps, CaptureState, Event
from perftop.peer import check_same_user
from perftop.wire import MAGIC, StreamError, encode_frame
from perftop.wire_stream import EventReader

CaptureWatch = Callable[[Event], object]  # gets one capture's CaptureState / CaptureOps
FINAL = ("refused", "failed")
CTRL_WAIT_S = 120.0  # the most a control connection waits for the hooks' answers


class CaptureDesk:
    def __init__(self, submit: Callable[..., None]) -> None:
        self.submit = submit
        # Sends whole frames to the training processes' hooks; the pids it reached (the
        # socket server's send_to_trainers; None where no hook connects to this hub).
        self.to_hooks: Callable[[bytes], list[int]] | None = None
        self.trace_dir = ""  # where a trace goes without a recording (the socket's dir)
        self.watch: dict[str, CaptureWatch] = {}
        self.threads: set[threading.Thread] = set()  # control connections being served
        self.ended = threading.Event()  # the hub has handled its last event

    def close(self, timeout: float = 1.0) -> None:
        """After the hub's last event: let the control connections send what they hold."""
        self.ended.set()
        deadline = time.monotonic() + timeout
        for t in list(self.threads):
            t.join(max(0.0, deadline - time.monotonic()))

    def ask(
        self, steps: int, by: str, on_event: CaptureWatch | None, recording: str = ""
    ) -> tuple[str, list[int]]:
        cid = uuid.uuid4().hex[:8]
        if recording:
            prefix = f"{recording}.capture-{cid}-"
        else:
            prefix = os.path.join(self.trace_dir, f"capture-{cid}-") if self.trace_dir else ""
        if on_event is not None:
            self.watch[cid] = on_event
        ask = CaptureAsk(time.time(), cid, steps, prefix, by)
        pids = self.to_hooks(encode_frame([ask])) if self.to_hooks is not None else []
        if pids:
            self.submit(CaptureState(time.time(), 0, cid, "asked", steps=steps))
        else:
            why = "no training process's hook is connected (is the job training yet?)"
            self.submit(CaptureState(time.time(), 0, cid, "refused", why))
        return cid, pids

    def connect(self, to_hooks: Callable[[bytes], list[int]], trace_dir: Any) -> None:
        """Where asks go (the socket server's ``send_to_trainers``), traces without a
        recording (the private socket directory)."""
        self.to_hooks, self.trace_dir = to_hooks, str(trace_dir)

    def forget(self, capture_id: str) -> None:
        self.watch.pop(capture_id, None)

    def tell(self, events: Any) -> None:
        """The hub's thread: hand a capture's events to who asked for it."""
        for ev in events:
            if isinstance(ev, (CaptureState, CaptureOps)):
                fn = self.watch.get(ev.capture_id)
                if fn is not None:
                    try:
                        fn(ev)
                    except Exception:
                        self.watch.pop(ev.capture_id, None)


class Answers:
    """Whether every process asked for a capture has answered (a summary, a refusal or a
    failure), or the monitor refused it itself (``pid`` 0)."""

    def __init__(self) -> None:
        self.pids: set[int] | None = None  # set once the hub said whom it asked

    def finished(self, ev: Event) -> bool:
        """Whether ``ev`` was the last answer awaited."""
        if isinstance(ev, CaptureState) and ev.pid == 0:
            return ev.state in FINAL
        if not isinstance(ev, (CaptureOps, CaptureState)) or self.pids is None:
            return False
        if ev.pid in self.pids and (isinstance(ev, CaptureOps) or ev.state in FINAL):
            self.pids.discard(ev.pid)
            return not self.pids
        return False


class Waiter(Answers):
    """Collects one capture's events until every process asked has answered."""

    def __init__(self) -> None:
        super().__init__()
        self.q: queue.Queue[Event] = queue.Queue()

    def __call__(self, ev: Event) -> None:
        self.q.put(ev)


def serve_control(hub: Any, conn: socket.socket, rest: bytes) -> None:
    """A control connection (the socket's thread): served on a thread of its own."""
    t = threading.Thread(target=_serve, args=(hub, conn, rest), name="perftop-control")
    t.daemon = True
    hub.captures.threads.add(t)
    t.start()


def _serve(hub: Any, conn: socket.socket, rest: bytes) -> None:
    cid = ""
    try:
        conn.setblocking(True)
        conn.settimeout(5.0)
        ask = _read_ask(conn, rest)
        waiter = Waiter()
        cid, pids = hub.capture(max(1, int(ask.steps)), ask.by or "trace", waiter)
        waiter.pids = set(pids)
        deadline = time.monotonic() + CTRL_WAIT_S + ask.steps
        conn.sendall(MAGIC)
        while time.monotonic() < deadline:
            try:
                ev = waiter.q.get(timeout=0.1)
            except queue.Empty:
                if hub.captures.ended.is_set():
                    break  # the session is over: nothing more will come
                continue
            conn.sendall(encode_frame([ev]))
            if waiter.finished(ev):
                break
    except (OSError, ValueError, StreamError):
        pass
    finally:
        if cid:
            hub.captures.forget(cid)
        conn.close()
        hub.captures.threads.discard(threading.current_thread())


def _read_ask(conn: socket.socket, rest: bytes) -> CaptureAsk:
    reader = EventReader()
    reader.feed(MAGIC)  # the client sends CTRL_MAGIC, then bare frames
    data = rest
    while True:
        for _frame, events in reader.feed(data):
            for ev in events:
                if isinstance(ev, CaptureAsk):
                    return ev
        data = conn.recv(65536)
        if not data:
            raise ValueError("the control client left before asking")


def request(
    path: str, steps: int, by: str, on_event: Callable[[Event], object], timeout: float
) -> None:
    """Ask the monitor at socket ``path`` for a capture; ``on_event`` gets its events until
    the monitor closes the connection. PerftopError (one line) when it cannot."""
    from perftop.monitor.server import CTRL_MAGIC  # server imports nothing of this module

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(min(timeout, 5.0))
        s.connect(path)
        check_same_user(s, "the socket")
        s.sendall(CTRL_MAGIC + encode_frame([CaptureAsk(time.time(), "", steps, "", by)]))
        reader = EventReader()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PerftopError(f"no answer from the job within {timeout:.0f} s")
            s.settimeout(left)
            data = s.recv(65536)
            if not data:
                return
            for _frame, events in reader.feed(data):
                for ev in events:
                    on_event(ev)
    except TimeoutError:
        raise PerftopError(f"no answer from the job within {timeout:.0f} s") from None
    except StreamError:
        raise PerftopError(f"{path}: not a perftop monitor's socket") from None
    except OSError as exc:
        raise PerftopError(f"cannot reach the monitor at {path}: {exc.strerror or exc}") from None
    finally:
        s.close()
