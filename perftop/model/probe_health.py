"""Which probes stopped, and why: a panel whose probe raises says so instead of going
quietly stale. A later sample from the same probe means it works again."""

from __future__ import annotations

from typing import Any

from perftop.events import GpuSample, HostSample, ProbeFailed, ProcSample

SAMPLE_OF = {ProcSample: "procs", HostSample: "host", GpuSample: "gpu"}


class ProbeHealthReducer:
    handles = (ProbeFailed, ProcSample, HostSample, GpuSample)

    def __init__(self) -> None:
        self.stopped: dict[str, tuple[float, str]] = {}  # probe -> (since t, reason)

    def apply(self, ev: Any) -> None:
        if isinstance(ev, ProbeFailed):
            self.stopped[ev.probe] = (ev.t, ev.reason)
            return
        name = SAMPLE_OF[type(ev)]
        failed = self.stopped.get(name)
        if failed is not None and ev.t > failed[0]:
            del self.stopped[name]

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        parts["probes_stopped"] = tuple(
            sorted((name, reason) for name, (_, reason) in self.stopped.items())
        )
