"""Python 3.14's ``sys.remote_exec``: load the full hook into a process started without
perftop. Only the version logic and the script are exercised here (see README): the
injection itself runs the target's own interpreter, which must be 3.14 or newer.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import perftop

MIN_VERSION = (3, 14)
_VERSION = re.compile(rb"python(3)\.(\d+)")


def python_version(pid: int) -> tuple[int, int] | None:
    """The target's Python (major, minor), from its executable's or libpython's name."""
    try:
        m = _VERSION.search(os.path.basename(os.path.realpath(f"/proc/{pid}/exe")).encode())
        if m is None:
            with open(f"/proc/{pid}/maps", "rb") as f:
                m = _VERSION.search(f.read())
    except OSError:
        return None
    return (int(m.group(1)), int(m.group(2))) if m else None


def can_inject(version: tuple[int, int] | None) -> tuple[bool, str]:
    """Whether the hook can be injected, and the line that says why (not)."""
    if version is None:
        return False, "its Python version could not be read, so the hook cannot be injected"
    v = f"{version[0]}.{version[1]}"
    if version >= MIN_VERSION:
        return True, (
            f"it runs Python {v}: 'perftop attach --inject PID' loads the full hook into it "
            "(steps, phases, sync sites) with sys.remote_exec"
        )
    return False, (
        f"it runs Python {v}; injecting the full hook needs Python 3.14+ (sys.remote_exec), "
        "so start it with 'perftop run' to see steps"
    )


def hook_script(socket_path: str) -> str:
    """What runs inside the target: perftop's stdlib-only hook, loaded by path."""
    pkg = str(Path(perftop.__file__).resolve().parent)
    return (
        "import importlib.util, os, sys\n"
        f"os.environ['PERFTOP_SOCKET'] = {socket_path!r}\n"
        "if 'perftop' not in sys.modules:\n"
        f"    spec = importlib.util.spec_from_file_location('perftop', {pkg + '/__init__.py'!r},"
        f" submodule_search_locations=[{pkg!r}])\n"
        "    mod = importlib.util.module_from_spec(spec)\n"
        "    sys.modules['perftop'] = mod\n"
        "    spec.loader.exec_module(mod)\n"
        "import perftop.hook\n"
        "perftop.hook.install_from_env()\n"
    )


def inject(pid: int, socket_path: str) -> None:
    """Run :func:`hook_script` in ``pid`` with its own interpreter's ``sys.remote_exec``."""
    exe = os.path.realpath(f"/proc/{pid}/exe")
    fd, script = tempfile.mkstemp(prefix="perftop-inject-", suffix=".py")
    with os.fdopen(fd, "w") as f:
        f.write(hook_script(socket_path))
    os.chmod(script, 0o644)
    out = subprocess.run(
        [exe, "-c", f"import sys; sys.remote_exec({pid}, {script!r})"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    if out.returncode != 0:
        raise OSError((out.stderr.strip().splitlines() or ["sys.remote_exec failed"])[-1])
