"""`perftop ls`: the perftop sessions on this machine, and Python processes with torch
loaded that `perftop attach PID` could observe. (The monitor loads only when it runs.)"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from perftop.cli.base import Command
from perftop.fmt import clip, table
from perftop.fmt import command as command_line
from perftop.safe import visible


def _when(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "-"


class LsCommand(Command):
    name = "ls"
    help = "list perftop sessions and Python processes with torch loaded"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="machine-readable JSON")
        parser.add_argument(
            "--ssh", metavar="[USER@]HOST",
            help="list HOST's sessions instead, through ssh (PERFTOP_SSH)",
        )  # fmt: skip

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        if args.ssh:
            from perftop.fleet.sshview import remote_ls

            remote = remote_ls(args.ssh)
            found, cands = remote["sessions"], remote["candidates"]
        else:
            found, cands = _local()
        if args.json:
            out = {"sessions": found, "candidates": cands}
            json.dump(out, sys.stdout, indent=2)
            sys.stdout.write("\n")
            return 0
        if found:
            rows = [
                [
                    str(s.get("job_pid") or "-"),
                    ",".join(str(p) for p in s.get("pids") or []) or "-",
                    _when(s.get("start_t")),
                    str(s.get("steps", 0)),
                    s.get("state", ""),
                    clip(command_line(s.get("command") or []), 50),
                    s["socket"],
                ]
                for s in found
            ]
            how = f"--ssh {args.ssh} " if args.ssh else ""
            print(f"perftop sessions (perftop attach {how}PID or SOCKET)")
            print(table(["job", "pids", "started", "steps", "state", "command", "socket"], rows))
        else:
            print(
                f"no perftop sessions on {args.ssh.rpartition('@')[2] if args.ssh else 'this machine'}"
            )
        if cands:
            rows = [
                [str(c["pid"]), str(c["children"]), _when(c["start_t"]), clip(c["command"], 70)]
                for c in cands
            ]
            print("\nPython processes with torch loaded (perftop attach PID: observer mode)")
            print(table(["pid", "children", "started", "command"], rows))
        return 0


def _local() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    import tempfile

    from perftop.monitor.outfiles import clean_left_behind
    from perftop.monitor.registry import candidates, session_pids, sessions

    cleaned = clean_left_behind(tempfile.gettempdir())
    if cleaned:
        print(visible(f"perftop: cleaned {cleaned} job output file(s) a killed monitor left "
                      f"behind in {tempfile.gettempdir()}"), file=sys.stderr)  # fmt: skip
    found = sessions()
    taken: set[int] = set()
    for s in found:
        taken |= session_pids(s)
    return found, [_cand(c) for c in candidates(taken)]


def _cand(c: Any) -> dict[str, Any]:
    return {"pid": c.pid, "command": c.command, "start_t": c.start_t, "children": c.children}
