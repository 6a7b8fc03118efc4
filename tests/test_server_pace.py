"""The socket server reads the hooks' frames a round at a time (one wake-up for all of
them, see ``PACE_S``), but never holds back a burst, nor an answer someone waits for."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

from perftop.events import Note
from perftop.monitor.server import PACE_S, Server
from perftop.wire import MAGIC, STEP_RECORD, encode_frame, encode_steps_frame


def _server(tmp: Path, hurry: Callable[[], bool] = lambda: False) -> tuple[Server, list[float]]:
    """A real server whose sink notes when each frame arrived (monotonic)."""
    arrived: list[float] = []
    srv = Server(lambda frame, events: arrived.append(time.monotonic()), tmp / "s.sock")
    srv.hurry = hurry
    return srv.start(), arrived


def _hook(srv: Server) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(srv.path))
    s.sendall(MAGIC)
    return s


def _wait(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and not cond():
        time.sleep(0.01)
    return cond()


def _gaps(tmp: Path, hurry: bool) -> list[float]:
    """Three pairs of small frames 30 ms apart: how long after the first the second came."""
    srv, arrived = _server(tmp, lambda: hurry)
    try:
        s = _hook(srv)
        gaps = []
        for i in range(3):
            n = len(arrived)
            s.sendall(encode_frame([Note(float(i), "info", "t", "first")]))
            assert _wait(lambda n=n: len(arrived) > n)
            time.sleep(0.03)
            s.sendall(encode_frame([Note(float(i), "info", "t", "second")]))
            assert _wait(lambda n=n: len(arrived) > n + 1)
            gaps.append(arrived[n + 1] - arrived[n])
            time.sleep(PACE_S + 0.05)  # the next pair starts after any pace
        s.close()
        return gaps
    finally:
        srv.close()


def test_small_frames_are_read_a_round_at_a_time(tmp_path):
    """After a small read the server waits a pace: the second frame, sent 30 ms after the
    first, is read at the pace's end (a busy machine only makes it later)."""
    assert min(_gaps(tmp_path, hurry=False)) >= PACE_S * 0.8


def test_answers_awaited_are_read_at_once(tmp_path):
    """While someone awaits the hooks' answers (a capture's), there is no pace."""
    assert min(_gaps(tmp_path, hurry=True)) < PACE_S * 0.6


def test_a_burst_is_read_without_pauses(tmp_path):
    """2 MB of steps sent at once (eight reads' worth) are all read within a pace: a round
    that read 32 KiB or more is followed at once."""
    srv, arrived = _server(tmp_path)
    try:
        record = STEP_RECORD.pack(7, 1, 1.0, 1.1, 0.0, 0.0, 0.0, 0)
        frame = encode_steps_frame([record] * 1000)  # ~49 KB
        s = _hook(srv)
        t0 = time.monotonic()
        s.sendall(frame * 40)
        assert _wait(lambda: len(arrived) == 40)
        # paced after each 256 KiB read it would take 7 paces (1.75 s)
        assert arrived[-1] - t0 < 3 * PACE_S, arrived[-1] - t0
        s.close()
    finally:
        srv.close()
