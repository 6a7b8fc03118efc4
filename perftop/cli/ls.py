"""`perftop ls`: the perftop sessions on this machine, and Python processes with torch
loaded that `perftop attach PID` could observe. (The monitor loads only when it runs.)"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from perftop.cli.base import Command
from perftop.report.fmt import command as command_line
from perftop.report.fmt import table


def _when(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "-"


class LsCommand(Command):
    name = "ls"
    help = "list perftop sessions and Python processes with torch loaded"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="machine-readable JSON")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        from perftop.monitor.registry import candidates, session_pids, sessions

        found = sessions()
        taken: set[int] = set()
        for s in found:
            taken |= session_pids(s)
        cands = candidates(taken)
        if args.json:
            out = {"sessions": found, "candidates": [_cand(c) for c in cands]}
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
                    command_line(s.get("command") or [])[:50],
                    s["socket"],
                ]
                for s in found
            ]
            print("perftop sessions (perftop attach PID or SOCKET)")
            print(table(["job", "pids", "started", "steps", "state", "command", "socket"], rows))
        else:
            print("no perftop sessions on this machine")
        if cands:
            rows = [[str(c.pid), str(c.children), _when(c.start_t), c.command[:70]] for c in cands]
            print("\nPython processes with torch loaded (perftop attach PID: observer mode)")
            print(table(["pid", "children", "started", "command"], rows))
        return 0


def _cand(c: Any) -> dict[str, Any]:
    return {"pid": c.pid, "command": c.command, "start_t": c.start_t, "children": c.children}
