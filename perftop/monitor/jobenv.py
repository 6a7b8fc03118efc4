"""What a job is launched with: its configuration, its command resolved, and the
environment that injects the hook. It stands alone because it needs no monitor: the tests
and benchmarks that start a hooked interpreter of their own take ``hook_env`` from here.
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

import perftop
from perftop.errors import LaunchError
from perftop.hook import ENV_SOCKET, ENV_SYNC_SEED

BOOTSTRAP_DIR = Path(perftop.__file__).resolve().parent / "_bootstrap"
# Where perftop takes the job's output into files: each Python process of the job makes
# its stdout and stderr line-buffered, as on a terminal (the bootstrap reads it by name:
# it imports nothing of perftop's).
ENV_LINES = "PERFTOP_LINE_BUFFERED"


def live_lines(env: dict[str, str], plain: dict[str, str]) -> None:
    """The job's Python output, written to files, comes a line at a time, as on a terminal.
    ``PYTHONUNBUFFERED`` alone (a block buffer on a file holds a ``print`` until the job's
    end) made each ``print`` two writes, its text and its newline: two ranks printing at
    once tore 36,264 of 40,000 lines into each other's, where a terminal's line buffering
    tears none. The bootstrap makes the streams line-buffered; ``PYTHONUNBUFFERED`` stays
    for a Python process that does not run it (``-S``, ``-I``, or ``plain``: no hook)."""
    env["PYTHONUNBUFFERED"] = plain["PYTHONUNBUFFERED"] = "1"
    env[ENV_LINES] = "1"


@dataclass(frozen=True, slots=True)
class RunConfig:
    command: tuple[str, ...]
    record: Path | None = None
    force: bool = False
    capture_output: bool = False  # the TUI owns the terminal: job output goes to a panel
    interval_s: float = 1.0  # probe sampling interval
    refresh_s: float = 0.5  # snapshot rate for the UI
    job_stdout_to_stderr: bool = False  # our stdout carries the session (--stream-out)
    # The terminal gone: the job is stopped rather than left running (the demo, which
    # trains until q: nobody would be left to end it)
    stop_when_lost: bool = False


def hook_env(
    socket_path: str | os.PathLike[str], base: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment that injects the hook into every Python process of the job."""
    env = dict(os.environ if base is None else base)
    parts = [str(BOOTSTRAP_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env[ENV_SOCKET] = str(socket_path)
    # the sync sampler's draws: the same on every rank of the job, others each session
    if not env.get(ENV_SYNC_SEED, "").strip():
        env[ENV_SYNC_SEED] = secrets.token_hex(8)
    return env


def resolve(command: tuple[str, ...]) -> str:
    if not command:
        raise LaunchError("no command given (try: perftop run python train.py)")
    exe = command[0]
    found = shutil.which(exe)
    if found is None:
        if os.path.isdir(exe):
            raise LaunchError(f"{exe}: is a directory, not a command")
        hint = f" (try: perftop run python {exe})" if exe.endswith(".py") else ""
        if os.sep in exe and os.path.isfile(exe):
            raise LaunchError(
                f"{exe}: not executable{hint or ' (chmod +x it, or name its interpreter)'}"
            )
        raise LaunchError(f"command not found: {exe}{hint}")
    return found
