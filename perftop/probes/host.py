"""The machine the job runs on: per-core CPU, iowait, load, memory, swap, disks, network.

Why per core: a job whose DataLoader workers pin two cores at 100% while the other 30 idle
looks healthy in a machine-wide average. Disk busy % is the busiest disk's, since one slow
disk starves the loader however idle the others are. Counters are deltas from the previous
tick; the first tick carries None for every rate.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

from perftop.events import Event, HostSample
from perftop.probes.platform import PlatformCaps, platform_caps

SHM = "/dev/shm"


def _is_whole_disk(name: str, caps: PlatformCaps) -> bool:
    """Whole block devices only (partitions would be counted twice); no loop/ram devices.
    Without /sys/block (macOS), psutil lists whole disks only."""
    if name.startswith(("loop", "ram", "zram")):
        return False
    return os.path.exists(f"/sys/block/{name}") if caps.sysfs_block else True


class HostProbe:
    name = "host"

    def __init__(self, caps: PlatformCaps | None = None) -> None:
        self.caps = caps or platform_caps()
        self._cpu: list[Any] | None = None
        self._disk: dict[str, Any] | None = None
        self._net: tuple[int, int] | None = None
        self._mono: float | None = None
        self._disks: dict[str, bool] = {}

    def sample(self, t: float) -> list[Event]:
        now = time.monotonic()
        dt = 0.0 if self._mono is None else now - self._mono
        self._mono = now
        per_core, total, iowait = self._cpu_percent()
        vm = psutil.virtual_memory()
        sw = psutil.swap_memory()
        try:
            load: tuple[float, ...] | None = tuple(round(x, 2) for x in os.getloadavg())
        except OSError:
            load = None
        disk_read, disk_write, busy = self._disk_delta(dt)
        net_rx, net_tx = self._net_delta()
        return [
            HostSample(
                t,
                round(dt, 4),
                len(per_core) if per_core else (psutil.cpu_count() or 0),
                total,
                per_core,
                iowait,
                load,
                vm.total,
                vm.total - vm.available,
                vm.available,
                sw.total,
                sw.used,
                disk_read,
                disk_write,
                busy,
                net_rx,
                net_tx,
                _shm_used(),
            )
        ]

    def _cpu_percent(self) -> tuple[tuple[float, ...], float | None, float | None]:
        cur = psutil.cpu_times(percpu=True)
        prev, self._cpu = self._cpu, cur
        if prev is None or len(prev) != len(cur):
            return (), None, None
        per_core: list[float] = []
        busy_sum = all_sum = iowait_sum = 0.0
        for a, b in zip(prev, cur):
            all_d = sum(b) - sum(a)
            # guest time is already inside user on Linux; do not count it twice
            for name in ("guest", "guest_nice"):
                all_d -= getattr(b, name, 0.0) - getattr(a, name, 0.0)
            idle_d = (b.idle - a.idle) + (getattr(b, "iowait", 0.0) - getattr(a, "iowait", 0.0))
            busy = max(0.0, all_d - idle_d)
            per_core.append(round(100.0 * busy / all_d, 1) if all_d > 0 else 0.0)
            busy_sum += busy
            all_sum += max(all_d, 0.0)
            iowait_sum += getattr(b, "iowait", 0.0) - getattr(a, "iowait", 0.0)
        iowait: float | None = None
        if self.caps.iowait:
            iowait = round(100.0 * max(0.0, iowait_sum) / all_sum, 1) if all_sum > 0 else 0.0
        if all_sum <= 0:
            return tuple(per_core), 0.0, iowait
        return tuple(per_core), round(100.0 * busy_sum / all_sum, 1), iowait

    def _disk_delta(self, dt: float) -> tuple[int | None, int | None, float | None]:
        try:
            cur = psutil.disk_io_counters(perdisk=True, nowrap=True) or {}
        except (OSError, RuntimeError):
            return None, None, None
        for name in cur:
            if name not in self._disks:
                self._disks[name] = _is_whole_disk(name, self.caps)
        cur = {k: v for k, v in cur.items() if self._disks[k]}
        prev, self._disk = self._disk, cur
        if prev is None or dt <= 0:
            return None, None, None
        rd = wr = 0
        busy = 0.0
        for name, b in cur.items():
            a = prev.get(name)
            if a is None:
                continue
            rd += max(0, b.read_bytes - a.read_bytes)
            wr += max(0, b.write_bytes - a.write_bytes)
            busy_ms = getattr(b, "busy_time", 0) - getattr(a, "busy_time", 0)
            busy = max(busy, min(100.0, busy_ms / 10.0 / dt))
        return rd, wr, round(busy, 1)

    def _net_delta(self) -> tuple[int | None, int | None]:
        try:
            nics = psutil.net_io_counters(pernic=True, nowrap=True)
        except OSError:
            return None, None
        rx = sum(v.bytes_recv for k, v in nics.items() if k != "lo")
        tx = sum(v.bytes_sent for k, v in nics.items() if k != "lo")
        prev, self._net = self._net, (rx, tx)
        if prev is None:
            return None, None
        return max(0, rx - prev[0]), max(0, tx - prev[1])


def _shm_used() -> int | None:
    """Bytes used on /dev/shm (tmpfs-wide): DataLoader batches cross processes there."""
    try:
        st = os.statvfs(SHM)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize
