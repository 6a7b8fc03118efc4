"""Many nodes into one view: real `perftop run --forward` processes, a real collector,
real TCP sockets on loopback. ``PERFTOP_HOST`` gives each forwarder its own node name, as
two machines would have."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from perftop.events import Hello, NodeLink, Note, SessionStart, Step
from perftop.fleet import link
from perftop.fleet.collector import Collector
from perftop.fleet.forwarder import Forwarder
from perftop.model.fleet import FleetSession
from perftop.wire import HEADER, Frame, decode_frame, encode_frame, encode_node_frame
from tests.helpers import WORKLOADS, count_selects, perftop


def _spawn(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "perftop", *args],
        cwd=cwd,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _collector(
    tmp_path: Path, token: str | None, *extra: str
) -> tuple[subprocess.Popen[str], list]:
    """`perftop collect` on a free loopback port; what it printed tells the port (and the
    token it made, where ``token`` is None)."""
    proc = _spawn(
        ["collect", "--listen", "127.0.0.1:0", "--headless", "--duration", "120", *extra],
        {link.ENV_TOKEN: token} if token is not None else {},
        tmp_path,
    )
    assert proc.stderr is not None
    lines = []
    for _ in range(20):
        lines.append(proc.stderr.readline())
        if "collecting on" in lines[-1]:
            return proc, lines
    raise AssertionError(f"collector did not start: {lines!r}")


def _port(lines: list[str], what: str) -> int:
    line = next(x for x in lines if what in x)
    return int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1))


def _frame(events: list) -> Frame:
    data = encode_frame(events)
    return Frame(0, data[HEADER.size :])


def test_two_nodes_reach_one_collector_and_a_wrong_token_is_refused(tmp_path):
    rec = tmp_path / "fleet.perftop"
    # the token the collector made and said, once it had bound its port (the line before)
    col, lines = _collector(tmp_path, None, "--record", str(rec), "--prometheus", "127.0.0.1:0")
    said = re.fullmatch(r"perftop: token for the nodes: PERFTOP_TOKEN=(\S+)\n", lines[-2])
    assert said is not None, lines
    secret = said.group(1)
    port = _port(lines, "collecting on")
    fwd = ["run", "--headless", "--no-record", "--forward", f"127.0.0.1:{port}", "--"]
    a = _spawn([*fwd, sys.executable, str(WORKLOADS / "no_loader.py")],
               {link.ENV_TOKEN: secret, link.ENV_HOST: "node-a"}, tmp_path)  # fmt: skip
    b = _spawn([*fwd, sys.executable, str(WORKLOADS / "manual_sgd.py")],
               {link.ENV_TOKEN: secret, link.ENV_HOST: "node-b"}, tmp_path)  # fmt: skip
    bad = _spawn([*fwd, sys.executable, str(WORKLOADS / "explicit_api.py")],
                 {link.ENV_TOKEN: "guess", link.ENV_HOST: "intruder"}, tmp_path)  # fmt: skip
    outs = {n: p.communicate(timeout=120) for n, p in (("a", a), ("b", b), ("bad", bad))}
    # A refused node still trains to the end, unhindered.
    assert a.returncode == b.returncode == bad.returncode == 0, outs
    assert "refused this node: wrong token" in outs["bad"][1]
    url = f"http://127.0.0.1:{_port(lines, 'metrics at')}/metrics"

    # Both nodes' steps, once the collector has applied what they sent (on a loaded VM the
    # metrics once had node-a's job but none of its steps yet, node-b's all)
    def both() -> bool:
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        return all(f'perftop_steps_total{{host="{n}"' in body for n in ("node-a", "node-b"))

    _wait_for(both, timeout=30.0)
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    assert re.search(r'perftop_steps_total\{host="node-a",rank=""\} 20', body), body
    assert re.search(r'perftop_steps_total\{host="node-b",rank=""\} 15', body), body
    assert "intruder" not in body
    col.send_signal(signal.SIGTERM)
    _, col_err = col.communicate(timeout=30)
    assert col.returncode == 0, col_err
    assert "refused a forwarder from 127.0.0.1: wrong token" in col_err

    rep = perftop("report", "--json", str(rec), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    r = json.loads(rep.stdout)
    by_host = {x["host"]: x for x in r["ranks"]}
    assert set(by_host) == {"node-a", "node-b"}  # the intruder never got in
    assert by_host["node-a"]["steps"] == 20 and by_host["node-b"]["steps"] == 15
    assert {n["name"] for n in r["nodes"]} == {"node-a", "node-b"}
    assert all(n["state"] == "exited (0)" for n in r["nodes"])
    mains = [(p["host"], p["role"]) for p in r["processes"] if p["role"] == "main"]
    assert sorted(mains) == [("node-a", "main"), ("node-b", "main")]
    assert any("wrong token" in n["text"] for n in r["notes"])
    text = perftop("report", str(rec), cwd=tmp_path).stdout
    assert "node-a" in text and "node-b" in text and "Nodes" in text


def test_same_pid_on_two_nodes_stays_two_processes():
    """Containers on two hosts often give their trainers the same pid."""
    s = FleetSession()
    for node, rank, dur in (("n1", 0, 0.1), ("n2", 1, 0.3)):
        frame = _frame(
            [Hello(1.0, 100, 1, "h", ("t",), rank, rank, 2)]
            + [Step(100, i, 1.0 + i, 1.0 + i + dur, backward=dur / 2) for i in range(6)]
        )
        s.apply_all(decode_frame(encode_node_frame(node, frame))[0])
    s.apply(NodeLink(2.0, "n1", True))
    snap = s.snapshot(window=None)
    assert [(r.host, r.pid, r.rank, r.count) for r in snap.ranks] == [
        ("n1", 100, 0, 6),
        ("n2", 100, 1, 6),
    ]
    assert {(x.host, x.role) for x in snap.roles} == {("n1", "rank"), ("n2", "rank")}
    assert snap.role_of(100, "n2").rank == 1
    assert [(n.name, n.connected) for n in snap.nodes] == [("n1", True), ("n2", False)]


def test_local_recordings_read_as_before():
    s = FleetSession()
    s.apply_all([SessionStart(1.0, ("python",), "/", "h", 1, "0"), Step(7, 0, 1.0, 1.5)])
    snap = s.snapshot(window=None)
    assert snap.nodes == () and snap.ranks[0].pid == 7 and snap.ranks[0].host == ""


def _handshake_then_stall(lsock: socket.socket, conns: list[socket.socket]) -> None:
    """A collector that lets a node in, then never reads again (a hung collector)."""
    conn, _ = lsock.accept()
    conns.append(conn)
    conn.sendall(link.greeting("n0nce"))
    f = conn.makefile("rb")
    f.readline()
    conn.sendall(b"OK\n")


def test_a_stalled_collector_never_blocks_the_node():
    lsock = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []
    threading.Thread(target=_handshake_then_stall, args=(lsock, conns), daemon=True).start()
    fw = Forwarder(lsock.getsockname()[:2], "t", host="n", max_buffer=256 * 1024)
    frame = _frame([Note(1.0, "info", "x", "y" * 4000)])
    t0 = time.monotonic()
    for _ in range(3000):  # ~12 MB: far more than the socket buffers and our buffer hold
        fw.write_frame(frame)
    took = time.monotonic() - t0
    assert took < 1.0, took  # appending only: the sink never waits for the network
    assert fw.dropped_frames > 0
    t0 = time.monotonic()
    fw.close()
    assert time.monotonic() - t0 < 15  # bounded drain, then gone
    lsock.close()


def test_forwarder_reconnects_and_resends_what_a_new_collector_needs():
    got: list = []
    sink = lambda f, evs: got.extend(evs)  # noqa: E731
    c1 = Collector(("127.0.0.1", 0), "t", sink, lambda *e: None, log=lambda s: None).start()
    addr = c1.address
    fw = Forwarder(addr, "t", host="n")
    fw.write_frame(_frame([Hello(1.0, 42, 1, "h", ("t",), 0, 0, 2)]))
    _wait_for(lambda: any(isinstance(e, Hello) for e in got))
    c1.close()
    got.clear()
    fw.write_frame(_frame([Note(2.0, "info", "x", "while away")]))
    c2 = Collector(addr, "t", sink, lambda *e: None, log=lambda s: None).start()
    fw.write_frame(_frame([Note(3.0, "info", "x", "after")]))
    _wait_for(lambda: any(getattr(e, "text", "") == "after" for e in got), 20)
    assert any(isinstance(e, Hello) and e.pid == 42 for e in got)  # the preamble
    fw.close()
    c2.close()


def _wait_for(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_forward_without_token_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != link.ENV_TOKEN}
    p = subprocess.run(
        [sys.executable, "-m", "perftop", "run", "--headless", "--forward", "127.0.0.1:9",
         "--", sys.executable, "-c", "pass"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "perftop: error: --forward needs the collector's token in PERFTOP_TOKEN "
        "(`perftop collect` prints it)"
    ]


def test_an_idle_collector_sleeps_until_a_handshake_falls_due_or_it_closes(monkeypatch):
    """The collector's thread sleeps in select() until a node, a handshake's deadline or
    close() wakes it (a 0.2 s timeout woke it five times a second for nothing)."""
    from perftop.fleet import collector

    monkeypatch.setattr(collector, "HANDSHAKE_S", 1.0)
    logged: list[str] = []
    c = Collector(("127.0.0.1", 0), "t", lambda f, e: None, lambda *e: None, log=logged.append)
    calls = count_selects(c._sel)
    c.start()
    try:
        time.sleep(1.2)
        assert calls[0] <= 2, calls  # idle
        silent = socket.create_connection(c.address)  # greeted, never answers
        t0 = time.monotonic()
        _wait_for(lambda: c.refused == 1, 5)
        took = time.monotonic() - t0
        assert 0.9 <= took < 1.5, took  # refused at its deadline, not a poll later
        assert any("no handshake in time" in line for line in logged), logged
        silent.close()
    finally:
        t0 = time.monotonic()
        c.close()
        assert time.monotonic() - t0 < 1.0  # the wake pipe ended its select() at once
    assert c._thread is not None and not c._thread.is_alive()
