"""A remote machine's sessions through the system ``ssh`` (or ``PERFTOP_SSH``), over
ssh's own channel, no port opened: ``perftop ls --ssh HOST`` runs ``perftop ls --json``
there, and the flows of ``attach --ssh`` and ``collect --ssh`` link their nodes here first.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any

from perftop.console import say
from perftop.errors import AttachError
from perftop.fleet.stream import SshNode, remote_perftop, ssh_argv, why_failed

LS_TIMEOUT_S = 60.0
SSH_FAILED = AttachError.exit_code  # one exit code for ssh failures: ls, attach, collect


def connect_first(nodes: Sequence[SshNode]) -> bool:
    """Before a TUI takes the terminal: link each node in turn, so that what ssh asks (an
    unknown host key, a passphrase, a password) is asked in the terminal, one host at a
    time. True when at least one is linked."""
    for n in nodes:
        say(f"perftop: connecting to {n.node} through ssh...")
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
