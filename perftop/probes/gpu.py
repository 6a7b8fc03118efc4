"""Every GPU through NVML, with the job's processes on it.

Labels matter here: NVML's "utilization" is the share of time at least one kernel ran, so a
single tiny kernel keeps it at 100%. Where the device has GPM (Hopper and later) we also
report SM activity, the share of SMs that were busy, which is what "is the GPU fed" means.
Per-process SM figures are NVML's per-process utilization samples (again time-based).
"""

from __future__ import annotations

from typing import Any

from perftop.events import Event, GpuSample, Note
from perftop.probes.nvml import Nvml, load

THROTTLE = (
    (0x1, "gpu_idle"),
    (0x2, "app_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)
GPM_SM_UTIL = 2  # NVML_GPM_METRIC_SM_UTIL: percentage of SMs that were busy


class _Device:
    def __init__(self, index: int, handle: Any) -> None:
        self.index = index
        self.handle = handle
        self.name = ""
        self.uuid = ""
        self.proc_ts = 0  # last per-process utilization timestamp seen
        self.gpm: list[Any] | None = None  # two GPM samples, previous first
        self.gpm_ready = False


class GpuProbe:
    name = "gpu"

    def __init__(self, lib: Any | None = None) -> None:
        self._lib_arg = lib
        self._nvml: Nvml | None = None
        self._devices: list[_Device] = []
        self._started = False
        self._pending: list[tuple[str, str]] = []

    def _note(self, level: str, text: str) -> None:
        self._pending.append((level, text))

    def _start(self, t: float) -> list[Event]:
        self._started = True
        lib, why = load(self._lib_arg)
        if lib is None:
            return [GpuSample(t, (), why), Note(t, "info", "gpu", why)]
        nv = self._nvml = Nvml(lib, self._note)
        for i in range(nv.call("nvmlDeviceGetCount") or 0):
            h = nv.call("nvmlDeviceGetHandleByIndex", i, device=i)
            if h is None:
                continue
            d = _Device(i, h)
            d.name = _str(nv.call("nvmlDeviceGetName", h, device=i))
            d.uuid = _str(nv.call("nvmlDeviceGetUUID", h, device=i))
            support = nv.call("nvmlGpmQueryDeviceSupport", h, device=i)
            if support is not None and getattr(support, "isSupportedDevice", False):
                a = nv.call("nvmlGpmSampleAlloc", device=i)
                b = nv.call("nvmlGpmSampleAlloc", device=i)
                if a is not None and b is not None:
                    d.gpm = [a, b]
            self._devices.append(d)
        return []

    def sample(self, t: float) -> list[Event]:
        events: list[Event] = []
        if not self._started:
            events += self._start(t)
        if self._nvml is None:
            return events
        nv = self._nvml
        rows = tuple(self._read(nv, d) for d in self._devices)
        note = ""
        if self._nvml.lost:
            note = "lost: GPU " + ", ".join(str(i) for i in sorted(self._nvml.lost))
        events.append(GpuSample(t, rows, note))
        events += [Note(t, lvl, "gpu", text) for lvl, text in self._pending]
        self._pending.clear()
        return events

    def _read(self, nv: Nvml, d: _Device) -> tuple[Any, ...]:
        h, i = d.handle, d.index
        lib = nv.lib
        util = nv.call("nvmlDeviceGetUtilizationRates", h, device=i)
        mem = nv.call("nvmlDeviceGetMemoryInfo", h, device=i)
        power = nv.call("nvmlDeviceGetPowerUsage", h, device=i)
        limit = nv.call("nvmlDeviceGetEnforcedPowerLimit", h, device=i)
        temp = nv.call("nvmlDeviceGetTemperature", h, lib.NVML_TEMPERATURE_GPU, device=i)
        clock = nv.call("nvmlDeviceGetClockInfo", h, lib.NVML_CLOCK_SM, device=i)
        rx = nv.call("nvmlDeviceGetPcieThroughput", h, lib.NVML_PCIE_UTIL_RX_BYTES, device=i)
        tx = nv.call("nvmlDeviceGetPcieThroughput", h, lib.NVML_PCIE_UTIL_TX_BYTES, device=i)
        reasons = nv.call("nvmlDeviceGetCurrentClocksEventReasons", h, device=i)
        return (
            i,
            d.name,
            d.uuid,
            _num(getattr(util, "gpu", None)),
            self._sm_activity(nv, d),
            _num(getattr(util, "memory", None)),
            getattr(mem, "used", None),
            getattr(mem, "total", None),
            None if power is None else round(power / 1000.0, 1),
            None if limit is None else round(limit / 1000.0, 1),
            _num(temp),
            _num(clock),
            None if rx is None else rx * 1024,  # NVML gives KB/s
            None if tx is None else tx * 1024,
            tuple(name for bit, name in THROTTLE if reasons and reasons & bit),
            self._procs(nv, d),
        )

    def _procs(self, nv: Nvml, d: _Device) -> tuple[tuple[Any, ...], ...]:
        running = nv.call("nvmlDeviceGetComputeRunningProcesses", d.handle, device=d.index)
        mem = {p.pid: getattr(p, "usedGpuMemory", None) for p in running or ()}
        sm: dict[int, list[float]] = {}
        samples = nv.call("nvmlDeviceGetProcessUtilization", d.handle, d.proc_ts, device=d.index)
        for s in samples or ():
            sm.setdefault(s.pid, []).append(float(s.smUtil))
            d.proc_ts = max(d.proc_ts, int(s.timeStamp))
        pids = sorted(set(mem) | set(sm))
        return tuple(
            (pid, mem.get(pid), round(sum(sm[pid]) / len(sm[pid]), 1) if pid in sm else None)
            for pid in pids
        )

    def _sm_activity(self, nv: Nvml, d: _Device) -> float | None:
        """GPM SM utilization between this tick's sample and the previous one."""
        if d.gpm is None:
            return None
        prev, cur = d.gpm
        if nv.call("nvmlGpmSampleGet", d.handle, cur, device=d.index) is None:
            return None
        d.gpm = [cur, prev]
        if not d.gpm_ready:
            d.gpm_ready = True
            return None
        lib = nv.lib
        mg = lib.c_nvmlGpmMetricsGet_t()
        mg.version = lib.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = 1
        mg.sample1, mg.sample2 = prev, cur
        mg.metrics[0].metricId = GPM_SM_UTIL
        if nv.call("nvmlGpmMetricsGet", mg, device=d.index) is None:
            return None
        m = mg.metrics[0]
        return round(float(m.value), 1) if m.nvmlReturn == 0 else None

    def close(self) -> None:
        if self._nvml is not None:
            for d in self._devices:
                for s in d.gpm or ():
                    self._nvml.call("nvmlGpmSampleFree", s)
            self._nvml.shutdown()
            self._nvml = None


def _num(x: Any) -> float | None:
    return None if x is None else float(x)


def _str(x: Any) -> str:
    if isinstance(x, bytes):
        return x.decode(errors="replace")
    return "" if x is None else str(x)
