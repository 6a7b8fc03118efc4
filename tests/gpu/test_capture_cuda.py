"""An op capture on a real GPU (issue 31; deselected without CUDA, see conftest.py): the
MLP of tests/workloads/capture_mlp.py on CUDA under `perftop run`, `perftop trace` of it.

Its top forward and backward ops are the matmuls, their kernels' device time is within the
step's GPU time (the hook's CUDA-event timer of the same steps), and the summary separates
kernel, memcpy and idle time per phase. Prints one ``capture:`` line for gpu_check.sh."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from perftop.events import CaptureOps, StepGpu
from perftop.recording import read_events

JOB = Path(__file__).resolve().parent.parent / "workloads" / "capture_mlp.py"
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]
MATMUL = ("aten::addmm", "aten::mm", "aten::matmul", "aten::linear")


def test_a_gpu_capture_shows_the_matmul_kernels_within_the_steps_gpu_time(tmp_path):
    gate, rec = tmp_path / "gate", tmp_path / "cuda.perftop"
    mon = subprocess.Popen(
        [sys.executable, "-m", "perftop", "run", "--headless", "--record", str(rec), "--",
         sys.executable, str(JOB), "cuda", str(gate)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert mon.stdout is not None and mon.stdout.readline().strip() == "ready"
    trace = subprocess.run(
        [sys.executable, "-m", "perftop", "trace", str(mon.pid), "--steps", "5"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ),
    )  # fmt: skip
    gate.touch()
    mon.communicate(timeout=300)
    assert trace.returncode == 0, trace.stderr
    events = list(read_events(rec))
    (cap,) = [e for e in events if isinstance(e, CaptureOps)]
    assert cap.device, "a CUDA job's capture has per-phase device time"
    for phase in ("forward", "backward"):
        rows = sorted((r for r in cap.ops if r[1] == phase), key=lambda r: r[4], reverse=True)
        assert rows and rows[0][0] in MATMUL and rows[0][4] > 0, (phase, rows[:3])
    gpu = [e.gpu_s for e in events if isinstance(e, StepGpu)
           and cap.first_step <= e.index < cap.first_step + cap.steps]  # fmt: skip
    assert gpu, "the hook's CUDA timer timed the captured steps"
    step_gpu = sum(gpu) / len(gpu)
    device = sum(r[4] for r in cap.ops)
    kernels = sum(k + m for k, m, _idle in cap.device.values())
    assert device <= kernels * 1.01 + 1e-6 and kernels <= step_gpu * 1.05 + 1e-4
    print(
        f"capture: top forward {cap.ops[0][0]}, device {kernels * 1e3:.2f} ms/step of a "
        f"{step_gpu * 1e3:.2f} ms GPU step; cost {cap.step_s / cap.before_s - 1:+.0%}"
    )
