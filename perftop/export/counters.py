"""Counter tracks of the Chrome trace (``ph: C``): what the probes sampled, over time.

Each process's CPU % and memory (MiB) on its own track; the host's CPU % and memory and
each GPU's use and memory on the host track (pid 0, or the node's own in a fleet). A
figure that was not sampled is left out of its event, never written as 0.
"""

from __future__ import annotations

from typing import Protocol

from perftop.events import GpuSample, HostSample, ProcSample
from perftop.events.probes import gpu_row, proc_row
from perftop.export.names import NAME_PROGRAM, NAME_ROLE


class Tracks(Protocol):
    """What the counters need of :class:`perftop.export.chrome.ChromeTrace`."""

    node: str

    def name(self, pid: int, label: str, sure: int = ...) -> None: ...

    def track(self, pid: int) -> int: ...

    def counter(self, pid: int, t: float, name: str, args: dict[str, float]) -> None: ...


MIB = 1024 * 1024


def _some(**kv: float | None) -> dict[str, float]:
    return {k: v for k, v in kv.items() if v is not None}


def _mib(v: int | None) -> float | None:
    return None if v is None else round(v / MIB, 1)


def processes(tr: Tracks, ev: ProcSample) -> None:
    for raw in ev.rows:
        r = proc_row(raw)
        if r is None:
            continue
        pid = r["pid"]
        tr.name(pid, r["name"] or "process", NAME_PROGRAM)
        tp = tr.track(pid)
        if r["cpu_percent"] is not None:
            tr.counter(tp, ev.t, "CPU %", {"CPU %": r["cpu_percent"]})
        mem = _some(rss=_mib(r["rss"]), uss=_mib(r["uss"]))
        if mem:
            tr.counter(tp, ev.t, "memory MiB", mem)


def _host_track(tr: Tracks) -> int:
    if tr.node:
        tr.name(0, "host", NAME_ROLE)
    return tr.track(0)


def host(tr: Tracks, ev: HostSample) -> None:
    tp = _host_track(tr)
    if ev.cpu_percent is not None:
        tr.counter(tp, ev.t, "host CPU %", {"CPU %": ev.cpu_percent})
    mem = _some(used=_mib(ev.mem_used), total=_mib(ev.mem_total))
    if mem:
        tr.counter(tp, ev.t, "host memory MiB", mem)


def gpus(tr: Tracks, ev: GpuSample) -> None:
    if not ev.devices:
        return
    tp = _host_track(tr)
    util: dict[str, float] = {}
    mem: dict[str, float] = {}
    for d in ev.devices:
        g = gpu_row(d)
        if g is None:
            continue
        if g["util_percent"] is not None:
            util[f"GPU {g['index']}"] = g["util_percent"]
        used = _mib(g["mem_used"])
        if used is not None:
            mem[f"GPU {g['index']}"] = used
    if util:
        tr.counter(tp, ev.t, "GPU use %", util)
    if mem:
        tr.counter(tp, ev.t, "GPU memory MiB", mem)
