"""The monitor's socket under bad input, and signals reaching the job."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

from perftop.events import Note
from perftop.monitor.server import Server
from perftop.monitor.sockpath import socket_dir
from perftop.wire import MAGIC, encode_frame
from tests.helpers import count_selects, spawn_slow_job


def _connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    return s


def _wait(cond, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end and not cond():
        time.sleep(0.02)
    return cond()


def test_bad_frames_are_counted_and_the_server_lives_on(tmp_path):
    got = []
    srv = Server(lambda payload, events: got.extend(events), tmp_path / "s.sock").start()
    try:
        assert oct(os.stat(srv.path).st_mode & 0o777) == "0o600"
        junk = _connect(srv.path)
        junk.sendall(b"GET / HTTP/1.0\r\n\r\n")  # a foreign stream: closed, counted
        bad = _connect(srv.path)
        frame = bytearray(encode_frame([Note(1.0, "info", "t", "damaged")]))
        frame[-2] ^= 0xFF
        bad.sendall(MAGIC + bytes(frame) + encode_frame([Note(1.0, "info", "t", "ok")]))
        notjson = _connect(srv.path)
        import struct
        import zlib

        payload = b"{not json"
        notjson.sendall(MAGIC + struct.pack(">III", len(payload), zlib.crc32(payload), 0) + payload)
        good = _connect(srv.path)
        good.sendall(MAGIC + encode_frame([Note(2.0, "info", "t", "second client")]))
        assert _wait(lambda: len(got) == 2 and srv.rejected_frames == 3)
        assert sorted(e.text for e in got) == ["ok", "second client"]
        assert srv.connections == 4
    finally:
        srv.close()
    assert not srv.path.exists()


def test_what_hooks_sent_before_the_server_closed_is_read_at_its_close(tmp_path):
    """Hooks that sent their streams as they exited, to a server whose thread had not run
    since (a loaded host; the job's end closes the server right after): a connection the
    thread accepted but never read, and one still waiting to be accepted, are read to
    their end at the close, not dropped with a process's steps in them. A viewer that
    connects then is not served."""
    from perftop.monitor.server import VIEW_MAGIC

    got, viewers = [], []
    srv = Server(lambda payload, events: got.extend(events), tmp_path / "s.sock",
                 on_viewer=viewers.append).start()  # fmt: skip
    accepted = _connect(srv.path)
    assert _wait(lambda: srv.connections == 1)
    srv.pause()  # its thread stops: it runs no more, as a starved one would not
    accepted.sendall(MAGIC + encode_frame([Note(1.0, "info", "t", "accepted, unread")]))
    accepted.close()
    late = _connect(srv.path)  # in the listening socket's queue: never accepted
    late.sendall(MAGIC + encode_frame([Note(2.0, "info", "t", "first")])
                 + encode_frame([Note(3.0, "info", "t", "last")]))  # fmt: skip
    late.close()
    viewer = _connect(srv.path)
    viewer.sendall(VIEW_MAGIC)
    try:
        assert srv.open_connections == 1  # the accepted one: its first bytes unread
        srv.close()
        assert [e.text for e in got] == ["accepted, unread", "first", "last"]
        assert viewers == [] and srv.connections == 3
    finally:
        viewer.close()


def test_a_peer_that_writes_on_and_on_does_not_hold_the_close(tmp_path):
    """The close's last reads stop after LAST_READS_S, whatever a peer keeps sending faster
    than the monitor takes it in (here a sink of 1 ms a frame)."""
    import threading

    from perftop.monitor.server import LAST_READS_S

    srv = Server(lambda payload, events: time.sleep(0.001), tmp_path / "s.sock").start()
    w = _connect(srv.path)
    w.sendall(MAGIC)
    assert _wait(lambda: srv.connections == 1)
    stop = threading.Event()
    frames = encode_frame([Note(1.0, "info", "t", "x" * 1000)]) * 64

    def flood() -> None:
        while not stop.is_set():
            try:
                w.sendall(frames)
            except OSError:
                return

    threading.Thread(target=flood, daemon=True).start()
    closing = threading.Thread(target=srv.close, daemon=True)
    t0 = time.monotonic()
    closing.start()
    closing.join(timeout=10)
    took = time.monotonic() - t0
    stop.set()
    w.close()
    assert not closing.is_alive() and took < LAST_READS_S + 3.0, took


def test_socket_directory_is_private():
    d = socket_dir()
    st = d.stat()
    assert st.st_mode & 0o777 == 0o700 and st.st_uid == os.getuid()


def test_sigint_without_a_terminal_is_forwarded(tmp_path):
    """No terminal sent it, so the job did not get it: perftop passes it on. Started as
    from `pytest &` in a script, which every process the suite starts inherits SIG_IGN
    from: the test's own start (``spawn_slow_job``'s default SIGINT) must undo it."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        mon = spawn_slow_job(tmp_path, "--no-record")
    finally:
        signal.signal(signal.SIGINT, old)
    time.sleep(0.5)
    mon.send_signal(signal.SIGINT)
    out, err = mon.communicate(timeout=30)
    assert "interrupted at" in out  # the job's own KeyboardInterrupt handler ran
    assert mon.returncode == 42


def test_an_info_answer_that_waits_holds_up_no_hook(tmp_path):
    """`perftop ls` is answered from a snapshot the hub takes when asked (up to a second
    behind a burst): on a thread of its own, so a hook's frames are read meanwhile."""
    from perftop.monitor.server import INFO_MAGIC

    got: list = []
    srv = Server(
        lambda payload, events: got.extend(events),
        tmp_path / "s.sock",
        info=lambda: time.sleep(1.5) or {"steps": 7},
    ).start()
    try:
        asker = _connect(srv.path)
        asker.sendall(INFO_MAGIC)
        time.sleep(0.1)  # the answer is being made
        t0 = time.monotonic()
        hook = _connect(srv.path)
        hook.sendall(MAGIC + encode_frame([Note(1.0, "info", "t", "meanwhile")]))
        assert _wait(lambda: len(got) == 1, timeout=1.0), "the hook waited for the answer"
        assert time.monotonic() - t0 < 1.0
        asker.settimeout(5)
        assert json.loads(asker.makefile().readline()) == {"steps": 7}
    finally:
        srv.close()


def test_an_idle_server_sleeps_and_a_frame_or_a_close_wakes_it(tmp_path):
    """The server thread sleeps in select() until a peer or its wake pipe ends it: each
    wake-up of an idle thread costs ~0.3 ms of CPU, and a 0.1 s timeout was ten a second."""
    got = []
    srv = Server(lambda payload, events: got.extend(events), tmp_path / "s.sock")
    calls = count_selects(srv._sel)
    srv.start()
    try:
        time.sleep(1.5)
        assert calls[0] <= 2, calls
        hook = _connect(srv.path)
        hook.sendall(MAGIC + encode_frame([Note(1.0, "info", "t", "awake")]))
        assert _wait(lambda: any(getattr(e, "text", "") == "awake" for e in got))
        hook.close()
    finally:
        t0 = time.monotonic()
        srv.close()
        assert time.monotonic() - t0 < 1.0  # the wake pipe ended its select() at once
    assert srv._thread is not None and not srv._thread.is_alive()


def test_the_signals_a_tui_took_are_given_back_when_it_ends():
    """Textual's Linux driver takes SIGCONT and SIGTSTP and never gives them back; its
    SIGCONT handler raises once the app's event loop is gone. A lost terminal's shell sends
    SIGCONT with SIGHUP as it exits, late when it is slow: the monitor died of it just
    before forking into the background, leaving the job with no monitor. Whatever the app
    set while it ran is undone when it ends (SIGCONT delivered here, after: nothing)."""
    from perftop.monitor.lifecycle import tui_signals

    def drivers_handler(signum, frame):
        raise RuntimeError("no running event loop")

    before = {s: signal.getsignal(s) for s in (signal.SIGCONT, signal.SIGTSTP, signal.SIGTERM)}
    with tui_signals(lambda: None):
        signal.signal(signal.SIGCONT, drivers_handler)  # as the app's driver does
        signal.signal(signal.SIGTSTP, drivers_handler)
    assert {s: signal.getsignal(s) for s in before} == before
    os.kill(os.getpid(), signal.SIGCONT)  # raised in the handler, were it still there
    time.sleep(0.01)
