"""The GPUs' samples reduced: each device's latest figures, its run averages and maxima
(:data:`GPU_AGGS`) and the pids it listed over the run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from perftop.events import GpuSample
from perftop.events.probes import gpu_row
from perftop.model.resources import Agg, whole_bytes
from perftop.model.snapshot import GpuProcRow, GpuRow

PIDS_SEEN = 256  # pids a GPU's rows listed, kept over the run (GpuRow.pids_seen)

# row field -> the name its run average and maximum go by in reports
GPU_AGGS = {
    "util_percent": "util_percent",
    "sm_activity_percent": "sm_activity_percent",
    "mem_util_percent": "memory_util_percent",
    "mem_used": "memory_used_bytes",
    "power_w": "power_w",
    "temperature_c": "temperature_c",
    "sm_clock_mhz": "sm_clock_mhz",
    "pcie_rx_bps": "pcie_rx_bps",
    "pcie_tx_bps": "pcie_tx_bps",
}


class GpusReducer:
    handles = (GpuSample,)

    def __init__(self) -> None:
        self.rows: dict[int, GpuRow] = {}
        self.aggs: dict[int, dict[str, Agg]] = {}
        self.note = ""
        self.pids: dict[int, set[int]] = {}  # per device, the pids it listed: GpuRow.pids_seen

    def apply(self, ev: Any) -> None:
        self.note = ev.note
        for raw in ev.devices:
            g = gpu_row(raw)
            if g is None:
                continue
            i = g["index"]
            aggs = self.aggs.setdefault(i, {k: Agg() for k in GPU_AGGS})
            for k in GPU_AGGS:
                aggs[k].add(g[k])
            seen = self.pids.setdefault(i, set())
            for p in g["processes"] or ():
                if len(seen) < PIDS_SEEN:
                    seen.add(p[0])
            self.rows[i] = GpuRow(
                index=i,
                name=g["name"] or "",
                uuid=g["uuid"] or "",
                util_percent=g["util_percent"],
                sm_activity_percent=g["sm_activity_percent"],
                mem_util_percent=g["mem_util_percent"],
                mem_used_bytes=g["mem_used"],
                mem_total_bytes=g["mem_total"],
                power_w=g["power_w"],
                power_limit_w=g["power_limit_w"],
                temperature_c=g["temperature_c"],
                sm_clock_mhz=g["sm_clock_mhz"],
                pcie_rx_bps=g["pcie_rx_bps"],
                pcie_tx_bps=g["pcie_tx_bps"],
                throttle=tuple(g["throttle"] or ()),
                processes=tuple(GpuProcRow(*p[:3]) for p in g["processes"] or ()),
                util_percent_avg=aggs["util_percent"].avg,
                util_percent_max=aggs["util_percent"].max,
                mem_used_bytes_max=whole_bytes(aggs["mem_used"].max),
                power_w_avg=aggs["power_w"].avg,
                temperature_c_max=aggs["temperature_c"].max,
                stats=tuple((GPU_AGGS[k], a.avg, a.max) for k, a in aggs.items()),
            )

    def contribute(self, parts: dict[str, Any], window: int | None) -> None:
        rows = [self.rows[i] for i in sorted(self.rows)]
        if window is None:  # the whole run's: with the pids each device listed over it
            rows = [replace(g, pids_seen=tuple(sorted(self.pids[g.index]))) for g in rows]
        parts["gpus"] = tuple(rows)
        parts["gpu_note"] = self.note
