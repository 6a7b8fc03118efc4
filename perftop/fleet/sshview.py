"""`perftop attach --ssh HOST TARGET` and `perftop ls --ssh HOST`: a remote machine's
sessions through the system ``ssh`` (or ``PERFTOP_SSH``), over ssh's own channel, no port
opened. The remote runs ``perftop attach --stream-out TARGET`` (or ``perftop ls --json``);
the stream is read by the same :class:`SshNode` that ``collect --ssh`` uses, as one node.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import perftop
from perftop.errors import AttachError, UsageError
from perftop.events import SessionStart
from perftop.fleet.stream import SshNode, remote_attach, remote_perftop, ssh_argv, why_failed
from perftop.recording import RecordingWriter

LS_TIMEOUT_S = 60.0
SSH_FAILED = AttachError.exit_code  # one exit code for ssh failures: ls, attach, collect


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def attach_ssh(args: argparse.Namespace) -> int:
    """Show a remote session here (TUI, or headless with a summary); ``SSH_FAILED`` when
    none came."""
    from perftop.cli.attach import _tui, _wait
    from perftop.fleet.collect import summary
    from perftop.model.fleet import FleetSession
    from perftop.monitor.hub import Hub

    if args.inject:
        raise UsageError("--inject is for a process on this machine, not with --ssh")
    session = FleetSession()
    hub = Hub(session, refresh_s=args.refresh)  # type: ignore[arg-type]  (same interface)
    rec = None
    if args.record is not None:
        rec = RecordingWriter(args.record, force=args.force)
        hub.subscribe(rec, buffered=False, record_path=str(rec.path))
    tui = not args.headless and sys.stdout.isatty() and sys.stdin.isatty()
    held: list[str] = []  # in the TUI, lines wait until the screen is given back
    log = held.append if tui else _stderr
    hub.start()
    hub.submit(
        SessionStart(
            t=time.time(),
            command=("perftop", "attach", "--ssh", args.ssh, args.target),
            cwd=os.getcwd(),
            host=socket.gethostname(),
            monitor_pid=os.getpid(),
            perftop_version=perftop.__version__,
            record_path=str(rec.path) if rec is not None else "",
        )
    )
    node = SshNode(
        args.ssh, (), hub.submit_frame, hub.submit, log, remote=remote_attach(args.target)
    ).start()
    try:
        if tui and connect_first([node]):
            _tui(hub, node, args)
        elif not tui:
            _wait(node, args.duration)
    finally:
        node.stop()
        hub.stop()
    for line in held:
        _stderr(line)
    if node.error:
        return SSH_FAILED
    for line in summary(session.snapshot(window=None), args.record, 0):
        _stderr(line)
    return 0


def connect_first(nodes: Sequence[SshNode]) -> bool:
    """Before a TUI takes the terminal: link each node in turn, so that what ssh asks (an
    unknown host key, a passphrase, a password) is asked in the terminal, one host at a
    time. True when at least one is linked."""
    for n in nodes:
        _stderr(f"perftop: connecting to {n.node} through ssh...")
        n.connect()
    return any(n.linked.is_set() for n in nodes)


def remote_ls(host: str) -> dict[str, Any]:
    """What ``perftop ls --json`` says on HOST: ``sessions`` and ``candidates``."""
    argv = ssh_argv(host, remote_perftop("ls --json"))
    try:
        p = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=LS_TIMEOUT_S
        )
    except OSError as exc:
        raise AttachError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise AttachError(f"{host}: no answer in {LS_TIMEOUT_S:.0f} s") from None
    node = host.rpartition("@")[2]
    if p.returncode != 0:
        err = p.stderr.decode(errors="replace").splitlines()
        raise AttachError(f"{node}: {why_failed(p.returncode, err, host)}")
    try:
        out = json.loads(p.stdout)
        if isinstance(out["sessions"], list) and isinstance(out["candidates"], list):
            return out
    except (ValueError, KeyError, TypeError):
        pass
    raise AttachError(
        f"{node}: the remote 'perftop ls --json' is not one this perftop reads "
        "(use the same perftop version on both sides)"
    )
