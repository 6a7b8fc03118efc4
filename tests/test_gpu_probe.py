"""The GPU probe against a fake NVML with pynvml's functions and error classes: figures,
per-process figures, SM activity through GPM, and every failure the probe handles."""

from __future__ import annotations

import pynvml
import pytest

from perftop.events import GpuSample, Note
from perftop.events.probes import gpu_row
from perftop.model import Session
from perftop.probes.gpu import GpuProbe
from perftop.report.build import build_report
from tests.fake_nvml import FakeGpu, FakeNvml


def ticks(probe: GpuProbe, n: int = 3) -> list:
    events = []
    for i in range(n):
        events += probe.sample(1000.0 + i)
    return events


def samples(events) -> list[GpuSample]:
    return [e for e in events if isinstance(e, GpuSample)]


def notes(events) -> list[str]:
    return [e.text for e in events if isinstance(e, Note)]


def test_device_figures_reach_snapshot_and_report():
    gpu = FakeGpu(processes=[(4242, 3 * 2**30)], proc_sm=[(4242, 77)], gpm_sm_util=35.5)
    nv = FakeNvml([gpu])
    events = ticks(GpuProbe(nv))
    row = gpu_row(samples(events)[-1].devices[0])
    assert row["name"] == gpu.name and row["util_percent"] == 87.0
    assert row["mem_used"] == 30 * 2**30 and row["mem_total"] == 80 * 2**30
    assert row["power_w"] == 412.0 and row["power_limit_w"] == 700.0
    assert row["temperature_c"] == 64.0 and row["sm_clock_mhz"] == 1755.0
    assert row["pcie_rx_bps"] == 2_000_000 * 1024 and row["throttle"] == ("sw_power_cap",)
    assert row["processes"] == ((4242, 3 * 2**30, 77.0),)
    assert row["sm_activity_percent"] == 35.5  # from the second GPM sample on
    assert gpu_row(samples(events)[0].devices[0])["sm_activity_percent"] is None
    assert notes(events) == []

    s = Session()
    s.apply_all(events)
    snap = s.snapshot(window=None)
    (g,) = snap.gpus
    assert g.util_percent_avg == 87.0 and g.processes[0].sm_percent == 77.0
    report = build_report(snap)
    (entry,) = report["gpus"]
    assert entry["util_percent_avg"] == 87.0 and entry["util_percent_max"] == 87.0
    assert entry["memory_used_bytes_max"] == 30 * 2**30 and entry["power_w_avg"] == 412.0
    assert entry["processes"] == [{"pid": 4242, "memory_bytes": 3 * 2**30, "sm_percent": 77.0}]
    assert report["gpu_note"] == ""


def test_no_gpm_and_no_process_samples_are_none_not_errors():
    events = ticks(GpuProbe(FakeNvml([FakeGpu(processes=[(7, None)])])))
    row = gpu_row(samples(events)[-1].devices[0])
    assert row["sm_activity_percent"] is None
    assert row["processes"] == ((7, None, None),)  # NVML's NotFound = no samples
    assert notes(events) == []


@pytest.mark.parametrize(
    ("nvml", "why"),
    [
        (FakeNvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), "NVML library not found"),
        (FakeNvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED), "driver not loaded"),
        (FakeNvml(init_error=pynvml.NVML_ERROR_UNKNOWN), "NVML could not start"),
        (FakeNvml([]), "no NVIDIA GPU"),
        (FakeNvml(fail={"nvmlDeviceGetCount": pynvml.NVML_ERROR_UNKNOWN}), "count"),
    ],
)
def test_no_usable_nvml_is_an_empty_list_with_a_note(nvml, why):
    events = ticks(GpuProbe(nvml))
    (sample,) = samples(events)  # said once, then the probe stays quiet
    assert sample.devices == () and why in sample.note
    s = Session()
    s.apply_all(events)
    snap = s.snapshot(window=None)
    assert snap.gpus == () and why in snap.gpu_note
    assert build_report(snap)["gpus"] == []


@pytest.mark.parametrize(
    ("fn", "code", "field"),
    [
        ("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NOT_SUPPORTED, "power_w"),
        ("nvmlDeviceGetTemperature", pynvml.NVML_ERROR_NO_PERMISSION, "temperature_c"),
        ("nvmlDeviceGetPcieThroughput", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, "pcie_rx_bps"),
        ("nvmlDeviceGetComputeRunningProcesses", pynvml.NVML_ERROR_NO_PERMISSION, "processes"),
        ("nvmlDeviceGetCurrentClocksEventReasons", pynvml.NVML_ERROR_UNKNOWN, "throttle"),
    ],
)
def test_a_failing_call_gives_na_for_its_field_and_one_note(fn, code, field):
    nv = FakeNvml(fail={fn: code})
    events = ticks(GpuProbe(nv), 4)
    rows = [gpu_row(s.devices[0]) for s in samples(events)]
    assert len(rows) == 4
    for row in rows:
        assert row[field] in (None, ()), row
        assert row["util_percent"] == 87.0  # the other figures are unaffected
    assert nv.calls[fn] >= 4  # still tried every tick...
    (note,) = notes(events)  # ...but reported once
    assert fn in note


def test_a_lost_gpu_stops_being_queried_and_says_so():
    nv = FakeNvml(
        [FakeGpu(), FakeGpu(uuid="GPU-1")],
        fail={"nvmlDeviceGetUtilizationRates": pynvml.NVML_ERROR_GPU_IS_LOST},
    )
    events = ticks(GpuProbe(nv), 3)
    last = samples(events)[-1]
    assert "lost" in last.note
    assert all(gpu_row(d)["mem_used"] is None for d in last.devices)
    assert nv.calls["nvmlDeviceGetMemoryInfo"] == 0
    assert len([n for n in notes(events) if "GPU is lost" in n]) == 2  # once per device


def test_real_nvml_on_this_machine_never_raises():
    events = ticks(GpuProbe(), 2)
    sample = samples(events)[0]
    if sample.devices:  # a machine with a GPU
        assert gpu_row(sample.devices[0])["mem_total"]
    else:
        assert sample.note
