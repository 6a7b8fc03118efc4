"""What the probes can measure on this OS: the one place that looks at ``sys.platform``.

Linux is where ``perftop run`` sees everything: psutil reads ``/proc``, where the kernel
keeps per-core placement, PSS, iowait and a cheap children list. Elsewhere (macOS)
``run`` still works with what psutil gives there, and the figures it cannot give are
``N/A``, never zeros; ``note`` says so once. Tests fake another OS by passing ``system``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

NAMES = {"darwin": "macOS", "win32": "Windows"}


@dataclass(frozen=True, slots=True)
class PlatformCaps:
    system: str  # sys.platform's value
    core_placement: bool  # psutil's Process.cpu_num(): the core a process last ran on
    uss: bool  # memory_full_info().uss (private pages)
    pss: bool  # memory_full_info().pss (shared pages split between their users)
    iowait: bool  # cpu_times().iowait
    proc_children: bool  # /proc/PID/task/TID/children: a child list without a full scan
    sysfs_block: bool  # /sys/block tells whole disks from partitions
    note: str = ""  # what is N/A here, said once in the session; "" on Linux


def platform_caps(system: str | None = None) -> PlatformCaps:
    """This machine's capabilities, or those of ``system`` (a ``sys.platform`` value)."""
    system = sys.platform if system is None else system
    if system.startswith("linux"):
        return PlatformCaps(system, True, True, True, True, True, True)
    mac = system == "darwin"  # psutil gives USS there (not PSS, placement or iowait)
    missing = (
        ["per-core placement", "PSS", "iowait"]
        if mac
        else ["per-core placement", "USS", "PSS", "iowait"]
    )
    name = NAMES.get(system, system)
    note = f"on {name} psutil cannot give {', '.join(missing)}: shown as N/A (Linux shows every figure)"
    return PlatformCaps(system, False, mac, False, False, False, False, note)
