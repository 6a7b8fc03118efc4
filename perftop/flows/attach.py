"""`perftop attach`: watch a running session or observe a plain process, here or through
ssh, in the TUI or headless, then print a summary."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from perftop.console import say
from perftop.errors import AttachError, UsageError
from perftop.flows.collect import summary as fleet_summary
from perftop.flows.notices import Notices, snapshot_every
from perftop.flows.watch import WatchOptions, record, show, wait, wants_tui
from perftop.model import Snapshot
from perftop.model.stacks import after_last_step
from perftop.monitor.header import session_start
from perftop.monitor.hub import Hub
from perftop.report.comm import stall_words as stall_line
from perftop.report.text import summary


def attach(
    target: str,
    opts: WatchOptions,
    *,
    interval_s: float = 1.0,
    inject: bool = False,
    stream_out: bool = False,
) -> int:
    """Watch ``target`` (a session, or a pid observed from outside). ``stream_out``: no TUI,
    the session's framed stream on stdout (what ``attach --ssh`` runs on the remote)."""
    from perftop.monitor.viewer import Observer

    tui = not stream_out and wants_tui(opts)
    # a sink cut off (a full disk): one line now, or a notice in the TUI and a line after it
    refresh = snapshot_every(opts.refresh_s, tui)
    hub = Hub(refresh_s=refresh, on_problem=None if tui else _say_problem)
    source = _source(target, hub, interval_s, inject)
    rec = record(hub, opts)
    out = None
    if stream_out:  # stdout carries only the stream; our lines go to stderr
        from perftop.fleet.stream import StreamOut

        out = StreamOut(sys.stdout.fileno(), log=say)
        hub.subscribe(out, buffered=False)
    elif not tui:  # a stall, a hang: a line when seen
        hub.snapshot_subscribers.append(Notices())
    problem = source.check() if isinstance(source, Observer) else None
    if problem is not None:
        say(f"perftop: warning: {problem}")
    hub.start()
    if inject:
        source.inject()
    source.start()
    try:
        if tui:
            show(hub, source, opts, "observer" if isinstance(source, Observer) else "viewer")
        else:
            wait(source, opts.duration_s, out.gone if out is not None else None)
    finally:
        source.stop()
        hub.stop()
    if tui:
        for line in hub.cutoffs.problems:
            _say_problem(line)
    if out is not None:
        return 0  # the reader has the session; a summary would only add noise
    snap = hub.session.snapshot(window=None)
    for line in summary(snap, opts.record, rec.error if rec is not None else None).split("\n"):
        say(line)  # (each made one line by the summary)
    for line in stack_summary(snap):
        say(line)
    return 0


def _say_problem(text: str) -> None:
    say(f"perftop: {text}")


def attach_ssh(host: str, target: str, opts: WatchOptions) -> int:
    """Show a session of HOST here (TUI, or headless with a summary), read through ssh;
    the ssh failure's exit code when none came."""
    from perftop.fleet.sshview import SSH_FAILED, connect_first
    from perftop.fleet.stream import SshNode, remote_attach
    from perftop.hints.session import hinted_session
    from perftop.model.fleet import FleetSession

    session = FleetSession(hinted_session)
    tui = wants_tui(opts)
    held: list[str] = []  # in the TUI, lines wait until the screen is given back
    log = held.append if tui else say
    refresh = snapshot_every(opts.refresh_s, tui)
    hub = Hub(session, refresh_s=refresh, on_problem=lambda t: log(f"perftop: {t}"))
    if not tui:  # a stall, a hang: a line when seen
        hub.snapshot_subscribers.append(Notices(out=log))
    rec = record(hub, opts)
    hub.start()
    hub.submit(
        session_start(
            time.time(),
            ("perftop", "attach", "--ssh", host, target),
            record_path=str(rec.path) if rec is not None else "",
        )
    )
    node = SshNode(host, (), hub.submit_frame, hub.submit, log, remote=remote_attach(target))
    node.start()
    try:
        if tui and connect_first([node]):
            show(hub, node, opts, "viewer")
        elif not tui:
            node.connect()  # the duration is of watching: ssh's own start-up is not in it
            wait(node, opts.duration_s)
    finally:
        node.stop()
        hub.stop()
    for line in held:
        say(line)
    if node.error:
        return SSH_FAILED
    err = rec.error if rec is not None else None
    for line in fleet_summary(session.snapshot(window=None), opts.record, 0, err):
        say(line)
    return 0


def _source(target: str, hub: Hub, interval_s: float, inject: bool) -> Any:
    from perftop.monitor.registry import find_session, job_top
    from perftop.monitor.viewer import Observer, SessionViewer

    info = find_session(target)
    if info is not None:
        if inject:
            raise UsageError("--inject is for a process started without perftop")
        return SessionViewer(info["socket"], hub)
    if Path(target).suffix == ".sock":
        raise AttachError(f"{target}: no perftop session answers there (see perftop ls)")
    if not target.isdigit():
        raise UsageError(f"{target}: not a session or a pid (see perftop ls)")
    pid = int(target)
    top = job_top(pid)
    if top != pid:
        say(f"perftop: pid {pid} is a worker of pid {top}: observing {top}")
    _check_observable(top)
    return Observer(top, hub, interval_s)


def _check_observable(pid: int) -> None:
    """Observer mode watches a Python training: refuse, in one line, perftop's own
    processes (a shell's tree holds this perftop, which it would end up sampling) and a
    process that is not Python (which would be watched forever with nothing to show)."""
    import psutil

    from perftop.monitor.inject import python_version
    from perftop.monitor.registry import has_torch

    try:
        proc = psutil.Process(pid)
        name = proc.name()
        mine = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    except psutil.NoSuchProcess:
        raise AttachError(f"no process with pid {pid}") from None
    except psutil.Error:
        return  # the Observer says what it cannot read
    python = python_version(pid) is not None or name.lower().startswith("python")
    if pid in mine and (python or pid == os.getpid()):
        raise AttachError(
            f"pid {pid} ({name}) runs this perftop: give the pid of a training (see perftop ls)"
        )
    if python:
        return
    try:  # its trainings: in its own session (a wrapper's), not any below it (init's)
        sid = os.getsid(pid)
        found = [
            c.pid
            for c in proc.children(recursive=True)
            if c.pid not in mine
            and _sid(c.pid) == sid
            and has_torch(c.pid)
            and not has_torch(c.ppid())
        ]
    except (psutil.Error, OSError):
        found = []
    hint = f": its training is pid {found[0]}" if len(found) == 1 else ""
    more = ", …" if len(found) > 3 else ""
    if found and not hint:
        hint = f": its trainings are pids {', '.join(map(str, found[:3]))}{more}"
    raise AttachError(
        f"pid {pid} ({name}) is not a Python process perftop can observe{hint} (see perftop ls)"
    )


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def stack_summary(snap: Snapshot) -> list[str]:
    """Where the observed processes spent their time, and the last stall, in a few lines."""
    out = []
    for r in snap.stacks:
        top = ", ".join(f"{w} {s:.0%}" for w, s in r.where[:3])
        out.append(f"perftop: {r.role} {r.pid}: {top} ({r.samples} samples)")
    # as the live line said them (a rank, a pass or collective); work after training is
    # no stall, said by the summary above (report.comm.tail_words)
    stalls = [s for s in snap.stalls if after_last_step(snap, s) is None]
    if stalls:
        out.append(f"perftop: {len(stalls)} stall(s); last: {stall_line(snap, stalls[-1])}")
    return out
