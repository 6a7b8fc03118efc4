"""The GPU path on a real GPU (deselected where there is no CUDA: see conftest.py).

Each test runs tests/gpu/cuda_train.py (or the demo) under ``perftop run`` and compares
perftop's figures with what the job, torch or nvidia-smi measure themselves.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perftop.events import CollBatch
from perftop.recording import read_events
from perftop.report.build import build_report, session_from_file

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "cuda_train.py"
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(900)]


def perftop(tmp_path: Path, *cmd: str, env: dict[str, str] | None = None) -> tuple[dict, dict]:
    """``perftop run --headless`` on ``cmd``: (the report, the job's RESULT line)."""
    rec = tmp_path / f"run{len(list(tmp_path.iterdir()))}.perftop"
    full = {**os.environ, "PYTHONWARNINGS": "", **(env or {})}
    p = subprocess.run(
        [sys.executable, "-m", "perftop", "run", "--headless", "--record", str(rec), "--", *cmd],
        capture_output=True, text=True, env=full, timeout=600,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    result = {}
    for line in (p.stdout + p.stderr).splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[7:])
    report = build_report(session_from_file(str(rec)).snapshot(window=None))
    report["_stderr"] = p.stderr
    return report, result


def plain(*args: str, flags: tuple[str, ...] = ()) -> dict:
    p = subprocess.run(
        [sys.executable, *flags, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr[-3000:]
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[7:])


def marked(name: str) -> int:
    for n, text in enumerate(SCRIPT.read_text().splitlines(), 1):
        if f"# SITE {name}" in text:
            return n
    raise AssertionError(name)


def hook_errors(report: dict) -> list[str]:
    return [n["text"] for n in report["notes"] if "hook error" in n["text"]]


def test_gpu_time_per_step_matches_cuda_events(tmp_path):
    report, job = perftop(tmp_path, sys.executable, str(SCRIPT), "--no-syncs", "--steps", "200")
    ours = report["steps"]["gpu_time_s"]["p50"]
    assert ours is not None, "no GPU time per step"
    assert ours == pytest.approx(job["gpu_p50_s"], rel=0.3)
    assert hook_errors(report) == []


def test_syncs_at_their_lines_with_blocked_time(tmp_path):
    report, _ = perftop(
        tmp_path, sys.executable, str(SCRIPT), "--steps", "40", env={"PERFTOP_SYNC": "all"}
    )
    got = {(e["line"], e["op"]): e for e in report["sync_events"] if e["file"] == str(SCRIPT)}
    for name, op in (("nonzero", "nonzero"), ("mask", "boolean_mask"), ("item", "item")):
        e = got.get((marked(name), op))
        assert e is not None, (name, sorted(got))
        assert e["kind"] == "sync"  # confirmed by CUDA's sync debug mode
        assert e["per_step"] == pytest.approx(1.0, abs=0.1)
        assert e["blocked_s"] is not None and e["blocked_s"] > 0
    assert "synchronizing" not in report["_stderr"]


def test_sync_detection_cost_on_a_sync_heavy_step(tmp_path):
    """What watching every step costs (the sampled default pays this once per sample)."""
    off, _ = perftop(tmp_path, sys.executable, str(SCRIPT), env={"PERFTOP_SYNC": "off"})
    on, _ = perftop(tmp_path, sys.executable, str(SCRIPT), env={"PERFTOP_SYNC": "all"})
    a, b = off["steps"]["step_time_s"]["p50"], on["steps"]["step_time_s"]["p50"]
    print(f"\nsync-heavy step p50: off {a * 1e3:.3f} ms, watched {b * 1e3:.3f} ms ({b / a:.2f}x)")
    assert b < a * 3 + 0.005


def test_gpu_panel_matches_nvidia_smi(tmp_path):
    smi = shutil.which("nvidia-smi")
    assert smi, "nvidia-smi not found on a CUDA machine"
    report, _ = perftop(tmp_path, sys.executable, str(SCRIPT), "--no-syncs", "--steps", "400")
    q = subprocess.run(
        [smi, "--query-gpu=index,name,memory.total,power.limit", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=True,
    ).stdout.strip().splitlines()  # fmt: skip
    smi_rows = {int(r.split(",")[0]): [c.strip() for c in r.split(",")] for r in q}
    assert report["gpus"], report["gpu_note"]
    for g in report["gpus"]:
        idx, name, mem_mib, power = smi_rows[g["index"]]
        assert g["name"] == name
        assert g["memory_total_bytes"] / 2**20 == pytest.approx(float(mem_mib), rel=0.01)
        if g["power_limit_w"] is not None and power not in ("[N/A]", "N/A"):
            assert g["power_limit_w"] == pytest.approx(float(power), rel=0.05)
    assert any(p["pid"] for g in report["gpus"] for p in g["processes"])


def test_cuda_graph_capture_and_replay(tmp_path):
    """No perftop event is recorded or queried while a stream captures: a stray one would
    make the capture fail, and the job with it."""
    report, _ = perftop(tmp_path, sys.executable, str(SCRIPT), "--graph", "--steps", "50")
    assert hook_errors(report) == []


def test_compile_on_cuda_makes_the_same_graphs(tmp_path):
    want = plain("--compile", "--steps", "10")
    _, got = perftop(tmp_path, sys.executable, str(SCRIPT), "--compile", "--steps", "10")
    assert (got["unique_graphs"], got["graph_break"]) == (
        want["unique_graphs"],
        want["graph_break"],
    )


@pytest.mark.parametrize("how", ["-W error", "filter after import torch"])
def test_error_filters_raise_nothing(tmp_path, how):
    flags = ("-W", "error") if how == "-W error" else ()
    extra = ("--error-filter-after",) if how != "-W error" else ()
    plain("--steps", "10", *extra, flags=flags)  # the control: a plain run passes
    report, _ = perftop(
        tmp_path, sys.executable, *flags, str(SCRIPT), "--steps", "20", *extra,
        env={"PERFTOP_SYNC": "all"},
    )  # fmt: skip
    assert any(e["kind"] == "sync" for e in report["sync_events"])
    assert "synchronizing" not in report["_stderr"]


def test_demo_on_cuda(tmp_path):
    rec = tmp_path / "demo.perftop"
    p = subprocess.run(
        [sys.executable, "-m", "perftop", "demo", "--headless", "--record", str(rec),
         "--steps", "60"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    report = build_report(session_from_file(str(rec)).snapshot(window=None))
    assert report["steps"]["count"] >= 50
    assert report["gpus"], report["gpu_note"]


def test_nccl_collectives_are_read(tmp_path):
    """NCCL keeps its collectives in a flight recorder of its own (``_dump_nccl_trace``):
    the rank's DDP all-reduces and its metric all-reduces are in its collectives, each
    counted once, at the user's line."""
    if not torch_has_nccl():
        pytest.skip("this torch build has no NCCL")
    script = str(HERE / "nccl_steps.py")
    env = {"TORCH_FR_BUFFER_SIZE": "256", "TORCH_NCCL_ENABLE_TIMING": "1"}
    report, result = perftop(tmp_path, sys.executable, script, "20", env=env)
    assert result == {"steps": 20, "metric_all_reduces": 20}
    # each record with NCCL's time of it on the GPU (read once retired: no host sync)
    (rec,) = tmp_path.glob("*.perftop")
    times = [r[10] if len(r) > 10 else None for ev in read_events(str(rec))
             if isinstance(ev, CollBatch) for r in ev.records]  # fmt: skip
    assert times and all(t is not None and 0.0 < t < 1.0 for t in times), times[:20]
    assert report["steps"]["count"] == 20
    (rank,) = report["ranks"]
    ops = {(c["pg"], c["op"]): c for c in rank["collectives"]}
    reduce = ops[("default_pg", "all_reduce")]
    # the metric's, and DDP's one bucket a step where a world of one still reduces
    assert 20 <= reduce["count"] <= 2 * 20 + 2, ops
    metric = [s for s in reduce["sites"] if s["call"] == "all_reduce"
              and s["line"].split(":")[0].endswith("nccl_steps.py")]  # fmt: skip
    assert sum(s["count"] for s in metric) == 20, reduce["sites"]


def torch_has_nccl() -> bool:
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_nccl_available())
