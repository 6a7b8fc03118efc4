"""Python stacks of a running process, read from outside with py-spy.

py-spy reads the target's memory (ptrace), so it needs the same permissions a debugger
does: when it is refused, :func:`permission_advice` says why and how to fix it in plain
words. Dumps run in a subprocess with a timeout, never on the hub's thread. Only the job's
own processes (the root the user named and its descendants) are ever dumped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from perftop.events.stacks import StackFrame
from perftop.probes.procread import descendants

DUMP_TIMEOUT_S = 5.0
MAX_FRAMES = 40
CAP_SYS_PTRACE = 19


class StackError(Exception):
    """A dump that failed; ``permission`` when the kernel refused access."""

    def __init__(self, text: str, permission: bool = False) -> None:
        super().__init__(text)
        self.permission = permission


def pyspy() -> str | None:
    """The py-spy executable: next to this Python (a venv), else on PATH."""
    here = Path(sys.executable).with_name("py-spy")
    if here.exists():
        return str(here)
    return shutil.which("py-spy")


def in_job(root: int, pid: int) -> bool:
    """Whether ``pid`` is ``root`` or below it: the only processes perftop may dump."""
    return pid == root or pid in descendants(root)


def dump(pid: int, *, blocking: bool = False, timeout: float = DUMP_TIMEOUT_S) -> list[Any]:
    """py-spy's JSON dump of every Python thread of ``pid``. Non-blocking by default (the
    target is not paused: a sample may be slightly inconsistent, never slows it)."""
    exe = pyspy()
    if exe is None:
        raise StackError("py-spy is not installed (pip install py-spy)")
    cmd = [exe, "dump", "--pid", str(pid), "--json"]
    if not blocking:
        cmd.append("--nonblocking")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise StackError(f"py-spy took over {timeout:g} s on pid {pid}") from None
    except OSError as exc:
        raise StackError(f"cannot run py-spy: {exc.strerror}") from None
    if out.returncode != 0:
        err = (out.stderr or out.stdout).strip()
        first = next((x for x in err.splitlines() if x.startswith("Error:")), "")
        text = first.removeprefix("Error:").strip() or f"py-spy exited with {out.returncode}"
        low = err.lower()
        perm = "permission denied" in low or "operation not permitted" in low
        raise StackError(text, permission=perm)
    try:
        data = json.loads(out.stdout)
    except json.JSONDecodeError:
        raise StackError(f"py-spy gave no readable stacks for pid {pid}") from None
    return data if isinstance(data, list) else []


def pick_thread(
    pid: int, threads: list[Any], tid: int | None = None
) -> tuple[tuple[StackFrame, ...], str, bool]:
    """The thread that matters most: the process's training thread where its hook named one
    (``tid``: a Ray Train worker's training function; its main thread waits in an event
    loop), else its main thread (its tid is its pid), else the first one. Returns (frames
    innermost first, thread name, idle)."""
    pick = next((t for t in threads if t.get("os_thread_id") == (tid or pid)), None)
    if pick is None and tid is not None:
        pick = next((t for t in threads if t.get("os_thread_id") == pid), None)
    if pick is None and threads:
        pick = threads[0]
    if pick is None:
        return (), "", False
    frames = tuple(
        (str(f.get("name", "")), str(f.get("filename", "")), int(f.get("line") or 0))
        for f in pick.get("frames", ())[:MAX_FRAMES]
    )
    name = pick.get("thread_name") or ("MainThread" if pick.get("os_thread_id") == pid else "")
    return frames, str(name), not bool(pick.get("active", True))


def permission_advice(pid: int) -> str:
    """Why reading ``pid``'s stacks was refused and what to do, in one or two sentences."""
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        owner = None
    me = os.geteuid()
    if owner is not None and owner != me and me != 0:
        return (
            f"pid {pid} belongs to another user (uid {owner}): run perftop as that user "
            "(or with sudo) to read its stacks"
        )
    if me == 0 and not _has_cap_ptrace():  # root, yet refused: a container's limits
        return (
            "this container lacks the SYS_PTRACE capability that reading another "
            "process's stacks needs: start it with --cap-add=SYS_PTRACE (docker) or "
            "securityContext.capabilities.add: [SYS_PTRACE] (Kubernetes)"
        )
    scope = _ptrace_scope()
    if scope == 1:  # the hook lets its monitor in (PR_SET_PTRACER); this one has none
        return (
            "kernel.yama.ptrace_scope is 1, which lets a process read only its own "
            "children; processes with perftop's hook allow their monitor themselves, this "
            "one has no hook: run perftop with sudo, or allow it with "
            "'sudo sysctl kernel.yama.ptrace_scope=0'"
        )
    if scope is not None and scope >= 2 and not (scope == 2 and me == 0):
        return (
            f"kernel.yama.ptrace_scope is {scope}, which lets only root (2) or no one (3) "
            "read another process's stacks: run perftop with sudo where it is 2"
        )
    if me == 0:  # sudo would change nothing
        return f"the kernel refused access to pid {pid} (ptrace), even to root"
    return f"the kernel refused access to pid {pid} (ptrace); try running perftop with sudo"


def traced(pid: int) -> bool:
    """Whether a tracer (strace, a debugger) is attached to ``pid``: py-spy cannot pause it
    then (the kernel lets one tracer in), though it can read it as it runs. psutil has no
    such figure: ``/proc/PID/status``'s ``TracerPid``."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                return int(line.split()[1]) != 0
    except (OSError, ValueError, IndexError):
        pass
    return False


def _ptrace_scope() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip())
    except (OSError, ValueError):
        return None


def _has_cap_ptrace() -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
    except (OSError, ValueError):
        pass
    return True
