"""`perftop collect` under a flood of bad hellos (issue 43, item 8): refusals carry no
text of the peer's, are told a few times per peer and a few per minute in all, and the
collector's memory of them stays bounded whatever the number of peers."""

from __future__ import annotations

import json
import socket
import threading
import time

from perftop.events import Note
from perftop.fleet import link
from perftop.fleet.collector import Collector
from perftop.fleet.refusals import LINES_PER_WINDOW, MAX_PEERS, WINDOW_S, Refusals

MARK = "EVIL\x1b]52;c;cm0gLXJmIH4=\x07\x9b2J"


def _hello(i: int) -> bytes:
    """A bad hello whose every field differs, escapes in each."""
    kinds = (
        {"v": f"{MARK}{i}", "session": "s", "host": "h", "mac": "m"},  # another format
        {"v": link.FORMAT_VERSION, "session": f"{MARK}{i}", "host": "h", "mac": "x"},  # token
    )
    if i % 3 == 2:
        return f"{MARK} not json {i}\n".encode()
    return json.dumps(kinds[i % 3]).encode() + b"\n"


def _flood(port: int, n: int, sources: int) -> None:
    for i in range(n):
        s = socket.socket()
        try:
            s.bind((f"127.0.{(i % sources) // 250}.{(i % sources) % 250 + 2}", 0))
            s.connect(("127.0.0.1", port))
            s.settimeout(5)
            s.recv(256)  # the greeting
            s.sendall(_hello(i))
            s.recv(256)  # DENIED ...
        except OSError:
            pass
        finally:
            s.close()


def test_a_flood_of_bad_hellos_is_told_in_a_few_fixed_lines() -> None:
    lines: list[str] = []
    notes: list[Note] = []
    col = Collector(("127.0.0.1", 0), "s3cret", lambda f, e: None,
                    lambda *evs: notes.extend(evs), log=lines.append).start()  # fmt: skip
    n = 3000
    try:
        threads = [threading.Thread(target=_flood, args=(col.address[1], n // 3, 1500))
                   for _ in range(3)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        deadline = time.monotonic() + 20
        while col.refused < n and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        col.close()
    assert col.refused == n
    told = "\n".join(lines + [ev.text for ev in notes if isinstance(ev, Note)])
    assert "EVIL" not in told and "\x1b" not in told and "\x9b" not in told  # none of theirs
    assert 1 <= len(lines) <= LINES_PER_WINDOW  # was a line per distinct text: thousands
    assert sum(isinstance(ev, Note) for ev in notes) == len(lines)
    assert col._refusals.peers <= MAX_PEERS  # 1500 addresses, a bounded memory of them


def test_each_peer_is_told_at_1_10_100_and_a_few_lines_a_minute_in_all() -> None:
    now = [0.0]
    r = Refusals(clock=lambda: now[0])
    told = [r.refuse("10.0.0.1", "wrong token") for _ in range(100)]
    assert [i + 1 for i, t in enumerate(told) if t] == [1, 10, 100]
    assert told[9] == "refused a forwarder from 10.0.0.1: wrong token (10 times)"
    assert r.refuse("10.0.0.2", "\x1b]0;x\x07 a peer's words") == (
        "refused a forwarder from 10.0.0.2: not a perftop forwarder"
    )
    lines = [r.refuse(f"10.1.{i // 250}.{i % 250}", "wrong token") for i in range(2000)]
    assert sum(t is not None for t in lines) == LINES_PER_WINDOW - 4  # 4 told above
    assert r.peers == MAX_PEERS
    now[0] += WINDOW_S  # a minute on: told again, with the count of what was not
    line = r.refuse("10.9.9.9", "wrong token")
    assert line is not None and "more refusals of other peers not told" in line
