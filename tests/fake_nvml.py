"""A fake NVML with the functions, constants and error classes of ``pynvml`` that the GPU
probe calls, for tests on machines without NVIDIA hardware.

Errors are pynvml's own ``NVMLError`` subclasses (they need no library to construct), so
the probe catches them exactly as it catches the real ones. ``fail`` maps a function name
to an NVML error code it raises on every call; ``init_error`` makes ``nvmlInit`` fail.
"""

from __future__ import annotations

import ctypes
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-fake"
    util: int = 87
    mem_util: int = 41
    mem_used: int = 30 * 2**30
    mem_total: int = 80 * 2**30
    power_mw: int = 412_000
    power_limit_mw: int = 700_000
    temperature: int = 64
    sm_clock: int = 1755
    pcie_rx_kbs: int = 2_000_000
    pcie_tx_kbs: int = 150_000
    reasons: int = 0x4  # sw_power_cap
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, bytes)
    proc_sm: list[tuple[int, int]] = field(default_factory=list)  # (pid, smUtil)
    gpm_sm_util: float | None = None  # None: the device has no GPM


class FakeNvml:
    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_PCIE_UTIL_RX_BYTES = pynvml.NVML_PCIE_UTIL_RX_BYTES
    NVML_PCIE_UTIL_TX_BYTES = pynvml.NVML_PCIE_UTIL_TX_BYTES
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        *,
        init_error: int | None = None,
        fail: dict[str, int] | None = None,
    ) -> None:
        self.gpus = gpus if gpus is not None else [FakeGpu()]
        self.init_error = init_error
        self.fail = dict(fail or {})
        self.calls: Counter[str] = Counter()
        self.ts = 1_000_000
        self._gpm: dict[int | None, float] = {}
        self.shut = False

    def _enter(self, fn: str) -> None:
        self.calls[fn] += 1
        if fn in self.fail:
            raise pynvml.NVMLError(self.fail[fn])

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        self._enter("nvmlDeviceGetHandleByIndex")
        return self.gpus[i]

    def nvmlDeviceGetName(self, h: FakeGpu) -> str:
        self._enter("nvmlDeviceGetName")
        return h.name

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str:
        self._enter("nvmlDeviceGetUUID")
        return h.uuid

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> Any:
        self._enter("nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=h.util, memory=h.mem_util)

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> Any:
        self._enter("nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(used=h.mem_used, total=h.mem_total, free=h.mem_total - h.mem_used)

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        self._enter("nvmlDeviceGetPowerUsage")
        return h.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeGpu) -> int:
        self._enter("nvmlDeviceGetEnforcedPowerLimit")
        return h.power_limit_mw

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:
        self._enter("nvmlDeviceGetTemperature")
        return h.temperature

    def nvmlDeviceGetClockInfo(self, h: FakeGpu, clock: int) -> int:
        self._enter("nvmlDeviceGetClockInfo")
        return h.sm_clock

    def nvmlDeviceGetPcieThroughput(self, h: FakeGpu, counter: int) -> int:
        self._enter("nvmlDeviceGetPcieThroughput")
        return h.pcie_rx_kbs if counter == self.NVML_PCIE_UTIL_RX_BYTES else h.pcie_tx_kbs

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeGpu) -> int:
        self._enter("nvmlDeviceGetCurrentClocksEventReasons")
        return h.reasons

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeGpu) -> list[Any]:
        self._enter("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in h.processes]

    def nvmlDeviceGetProcessUtilization(self, h: FakeGpu, last_ts: int) -> list[Any]:
        self._enter("nvmlDeviceGetProcessUtilization")
        if not h.proc_sm:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)  # as NVML: no samples
        self.ts += 1000
        return [
            SimpleNamespace(pid=p, timeStamp=self.ts, smUtil=sm, memUtil=0) for p, sm in h.proc_sm
        ]

    def nvmlGpmQueryDeviceSupport(self, h: FakeGpu) -> Any:
        self._enter("nvmlGpmQueryDeviceSupport")
        return SimpleNamespace(isSupportedDevice=int(h.gpm_sm_util is not None))

    def nvmlGpmSampleAlloc(self) -> Any:
        self._enter("nvmlGpmSampleAlloc")
        return ctypes.pointer(pynvml.struct_c_nvmlGpmSample_t())

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self.calls["nvmlGpmSampleFree"] += 1

    def nvmlGpmSampleGet(self, h: FakeGpu, sample: Any) -> Any:
        self._enter("nvmlGpmSampleGet")
        self._gpm[ctypes.cast(sample, ctypes.c_void_p).value] = h.gpm_sm_util or 0.0
        return sample

    def nvmlGpmMetricsGet(self, mg: Any) -> Any:
        self._enter("nvmlGpmMetricsGet")
        m = mg.metrics[0]
        m.value = self._gpm[ctypes.cast(mg.sample2, ctypes.c_void_p).value]
        m.nvmlReturn = 0
        return mg
