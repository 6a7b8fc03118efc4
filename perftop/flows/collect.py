"""`perftop collect`: hear many nodes' forwarders, record and show them as one session.

The collector is a source (a TCP server) feeding its own ingest, whose model is a
:class:`~perftop.model.fleet.FleetSession` (one session per node). It runs until
``--duration`` has passed, or Ctrl-C / SIGTERM / ``q``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perftop.console import say
from perftop.fleet.collector import Collector
from perftop.fleet.link import ENV_TOKEN
from perftop.fleet.sshview import SSH_FAILED, connect_first
from perftop.fleet.stream import SshNode, remote_command
from perftop.flows.notices import Notices
from perftop.flows.watch import STOP_SIGNALS, wait_until
from perftop.fmt import seconds
from perftop.hints.session import hinted_session
from perftop.model import Snapshot
from perftop.model.fleet import FleetSession
from perftop.monitor.header import session_start
from perftop.monitor.hub import Hub
from perftop.report.comm import hang_notice
from perftop.tui.process import TuiProcess


@dataclass(frozen=True, slots=True)
class CollectConfig:
    listen: tuple[str, int] | None  # None: no TCP listener (only --ssh nodes)
    token: str
    show_token: bool = False  # made here: said once the listener is bound, for the nodes
    record: Path | None = None
    force: bool = False
    duration_s: float | None = None
    refresh_s: float = 0.5
    headless: bool = True
    ssh: tuple[str, ...] = ()  # remote hosts to run ``command`` on through ssh
    command: tuple[str, ...] = ()
    remote_dir: str | None = None  # where ``command`` runs there (default: its $HOME)
    remote_record: str | None = None  # a recording there too (default: none)


def run_collect(
    cfg: CollectConfig,
    on_snapshot: Callable[[Snapshot], object] | None = None,
    log: Callable[[str], None] = say,
) -> int:
    session = FleetSession(hinted_session)
    collector: Collector | None = None
    want_tui = not cfg.headless
    tui: TuiProcess | None = None  # the TUI's own process (see perftop.tui.process)
    held: list[str] = []  # lines said while the TUI has the terminal: said after it

    def say_(line: str) -> None:
        if tui is not None:
            held.append(line)
        else:
            log(line)

    def snapshot(snap: Snapshot) -> None:
        if tui is not None:
            tui.post(snap)
        if on_snapshot is not None:
            on_snapshot(snap)

    if not want_tui:  # a stall, a hang: a line when seen
        on_snapshot = Notices(on_snapshot, out=say_)
    nodes: list[SshNode] = []

    def rejected() -> int:
        here = collector.rejected_frames if collector is not None else 0
        return here + sum(n.rejected_frames for n in nodes)

    hub = Hub(
        session,
        refresh_s=cfg.refresh_s,
        rejected_frames=rejected,
        on_problem=lambda text: say_(f"perftop: {text}"),  # a sink cut off (a full disk)
    )
    if want_tui or on_snapshot is not None:
        hub.snapshot_subscribers.append(snapshot)
    # Bind first: a busy port must not leave an empty recording behind.
    if cfg.listen is not None:
        collector = Collector(cfg.listen, cfg.token, hub.submit_frame, hub.submit, log=say_)
        if cfg.show_token:  # (not before: a port that cannot be bound says one line)
            say_(f"perftop: token for the nodes: {ENV_TOKEN}={cfg.token}")
    try:
        rec = hub.record(cfg.record, force=cfg.force) if cfg.record is not None else None
    except BaseException:
        if collector is not None:
            collector.close()
        raise
    where = "{}:{}".format(*collector.address) if collector is not None else ""
    args: tuple[str, ...] = ("--listen", where) if where else ()
    for h in cfg.ssh:
        args += ("--ssh", h)
    hub.start()
    started = time.time()
    hub.submit(
        session_start(
            started,
            ("perftop", "collect", *args, *(("--", *cfg.command) if cfg.ssh else ())),
            record_path=str(rec.path) if rec is not None else "",
        )
    )
    remote = remote_command(cfg.command, cfg.remote_record, cfg.remote_dir)
    nodes += [
        SshNode(h, (), hub.submit_frame, hub.submit, say_, echo=not want_tui, remote=remote)
        for h in cfg.ssh
    ]
    for n in nodes if not want_tui else ():
        n.start()
    if collector is not None:
        collector.start()
        log(f"perftop: collecting on {where}" + (f", recording to {rec.path}" if rec else ""))
    try:
        if want_tui and nodes:  # ssh asks its questions before the TUI starts
            linked = connect_first([n.start() for n in nodes])
            want_tui = linked or collector is not None
        if want_tui:
            tui = TuiProcess()
            running = tui.running
            wait_until(cfg.duration_s, lambda: not running(), (*STOP_SIGNALS, signal.SIGHUP))
        else:
            # Only ssh nodes: done when every remote stream has ended.
            done = (lambda: all(n.done for n in nodes)) if nodes and collector is None else None
            wait_until(cfg.duration_s, done)
    finally:
        if tui is not None:
            rc = tui.close()
            tui = None
            for line in held:
                log(line)
            if rc:  # its own line, if it failed, is on the terminal above
                log(f"perftop: the TUI's process ended with code {rc}")
        for n in nodes:
            n.stop()
        if collector is not None:
            collector.close()
        hub.stop()
    snap = session.snapshot(window=None)
    refused = collector.refused if collector is not None else 0
    for line in summary(
        snap,
        rec.path if rec is not None else None,
        refused,
        rec.error if rec is not None else None,
        time.time() - started,
    ):
        log(line)
    return exit_code(nodes)


def exit_code(nodes: list[SshNode]) -> int:
    """``SSH_FAILED`` when ssh failed for a node; else the worst of the remote jobs' exit
    codes (0 while they still run, or without ssh nodes)."""
    if any(n.error for n in nodes):
        return SSH_FAILED
    return max((n.job_exit or 0 for n in nodes), default=0)


def summary(
    snap: Snapshot,
    record: Path | None,
    refused: int,
    error: str | None = None,
    ran_s: float | None = None,
) -> list[str]:
    """The lines said at the end. ``ran_s``: how long the collector ran, where it knows
    (the session's own span ends at its last event: 3.98 s of a 4 s ``--duration`` with no
    node, as the last probe came before the stop)."""
    lines = [f"perftop: {len(snap.nodes)} node(s), {len(snap.ranks)} training process(es)"]
    for n in snap.nodes:
        ranks = [r for r in snap.ranks if r.host == n.name]
        steps = max((r.count for r in ranks), default=0)
        lines.append(f"perftop:   {n.name}: {n.state}, {len(ranks)} process(es), {steps} steps")
    lines += [hang_notice(snap, h) for h in snap.comm.hangs]
    if refused:
        lines.append(f"perftop: refused {refused} connection(s) (see the notes)")
    elapsed = ran_s if ran_s is not None else snap.meta.elapsed_s
    if elapsed is not None:
        lines.append(f"perftop: collected for {seconds(elapsed)}")
    if record is not None:
        until = f" until it stopped ({error})" if error else ""
        lines.append(f"perftop: recorded to {record}{until}  (perftop report {record})")
    return lines
