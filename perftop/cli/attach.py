"""`perftop attach [TARGET]`: watch a running perftop session (read-only, with its history)
or, for a plain Python process, observe it from outside (observer mode). With no TARGET,
the one session running, as htop needs no pid."""

from __future__ import annotations

import argparse
from pathlib import Path

from perftop.cli.base import Command, seconds
from perftop.errors import UsageError


class AttachCommand(Command):
    name = "attach"
    help = "watch a running perftop session, or observe a plain Python process"
    description = (
        "TARGET is a session (its socket, or any pid of its job, see 'perftop ls') or the "
        "pid of a Python process started without perftop, which is then observed from "
        "outside: its process tree, the host, GPUs, and stack samples through py-spy. "
        "With no TARGET, the one perftop session running on this machine."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "target", metavar="TARGET", nargs="?",
            help="session socket, or a pid (default: the one session running, if one is)",
        )  # fmt: skip
        parser.add_argument("--headless", action="store_true", help="no TUI: print a summary")
        parser.add_argument(
            "--duration", type=seconds, metavar="SECONDS", help="stop watching after this long"
        )
        parser.add_argument("--record", type=Path, metavar="FILE", help="record what is seen")
        parser.add_argument("--force", action="store_true", help="overwrite the recording")
        parser.add_argument(
            "--inject", action="store_true",
            help="observer mode, Python 3.14+: load the full hook into the process",
        )  # fmt: skip
        parser.add_argument(
            "--interval", type=seconds, default=1.0, metavar="SECONDS",
            help="observer mode: probe sampling interval (default 1.0)",
        )  # fmt: skip
        parser.add_argument(
            "--refresh", type=seconds, default=0.5, metavar="SECONDS",
            help="TUI refresh interval (default 0.5)",
        )  # fmt: skip
        parser.add_argument(
            "--ssh", metavar="[USER@]HOST",
            help="TARGET is on HOST: attach there through ssh (PERFTOP_SSH), no port opened",
        )  # fmt: skip
        parser.add_argument(
            "--allow-control", action="store_true",
            help="the TUI's t key may ask the job for an op capture (else read-only)",
        )  # fmt: skip
        parser.add_argument(
            "--stream-out", action="store_true",
            help="no TUI: write the session's framed stream to stdout (what --ssh runs)",
        )  # fmt: skip

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        from perftop.flows.attach import attach, attach_ssh
        from perftop.flows.watch import WatchOptions
        from perftop.probes.scheduler import check_interval

        check_interval(args.interval)
        if args.duration is not None and not args.duration > 0:
            raise UsageError("--duration must be a positive number of seconds")
        opts = WatchOptions(
            headless=args.headless,
            duration_s=args.duration,
            refresh_s=args.refresh,
            record=args.record,
            force=args.force,
            allow_control=args.allow_control,
        )
        if args.target is None:
            args.target = _the_only_session(args.ssh)
        if args.ssh:
            if args.stream_out:
                raise UsageError("--stream-out is what the remote runs: not with --ssh")
            if args.inject:
                raise UsageError("--inject is for a process on this machine, not with --ssh")
            return attach_ssh(args.ssh, args.target, opts)
        return attach(
            args.target,
            opts,
            interval_s=args.interval,
            inject=args.inject,
            stream_out=args.stream_out,
        )


def _the_only_session(ssh: str | None) -> str:
    """What ``perftop attach`` with no TARGET watches: this user's one session on this
    machine; with none or several, one line that says how to name one."""
    if ssh:
        raise UsageError(f"--ssh needs a TARGET: perftop ls --ssh {ssh} lists its sessions")
    from perftop.monitor.registry import only_session, sessions

    found = sessions()
    target = only_session(found)
    if target is not None:
        return target
    if found:
        pids = ", ".join(str(s["job_pid"]) if isinstance(s.get("job_pid"), int) else "?"
                         for s in found)  # fmt: skip
        raise UsageError(
            f"{len(found)} perftop sessions are running (jobs {pids}): "
            "perftop attach PID names one (perftop ls lists them)"
        )
    raise UsageError(
        "no perftop session is running on this machine: perftop attach PID observes a "
        "Python process started without perftop (perftop ls lists them)"
    )
