"""The probes on a real CPU training with 2 DataLoader workers, end to end: runner, hook,
probe thread, recording, report; and the same figures again from the recording alone."""

from __future__ import annotations

import json
import sys

from perftop.monitor.jobenv import RunConfig
from perftop.monitor.runner import Job
from perftop.probes import make_sources
from perftop.report.build import build_report, session_from_file
from tests.helpers import needs

needs("torch")

MB = 2**20


def _run(workloads, tmp_path, mode: str, seconds: str, *extra: str) -> tuple[dict, dict]:
    rec = tmp_path / f"{mode}.perftop"
    cfg = RunConfig(
        command=(sys.executable, str(workloads / "probe_loader.py"), mode, seconds, *extra),
        record=rec,
        interval_s=0.25,
    )
    job = Job(cfg, sources=[make_sources(cfg.interval_s)])
    job.start()
    assert job.wait() == 0
    live = build_report(job.snapshot())
    replay = build_report(session_from_file(str(rec)).snapshot(window=None))
    return live, replay


def _workers(report: dict) -> list[dict]:
    return [p for p in report["processes"] if p["role"] == "worker"]


def test_busy_workers_show_near_full_cpu_with_uss_and_pss(workloads, tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    live, replay = _run(workloads, tmp_path, "busy", "2.5", str(own))
    workers = _workers(live)
    assert len(workers) == 2, live["processes"]
    for w in workers:
        # Each worker counts its own CPU seconds over its own life: the probe's average must
        # agree with it, whatever share of a core this machine gave the worker (~95% alone
        # on a core; 45% on CI's 2 cores shared with the trainer, the monitor and two other
        # test processes' jobs, where the kernel keeps no run-queue delay to say it waited).
        # An idle worker (the loader waiting on its queue) reads under 10%.
        counted = json.loads((own / str(w["pid"])).read_text())
        share = counted["cpu_s"] / counted["wall_s"]
        assert share > 0.15, counted
        assert abs(w["cpu_percent_avg"] / 100.0 - share) < 0.2, (w, counted)
        assert w["cpu_percent_max"] > 15, w
        if w["core_wait_share_avg"] is not None:  # on a core or waiting for one
            assert w["cpu_percent_avg"] / 100.0 + w["core_wait_share_avg"] > 0.6, w
        assert w["uss_bytes_max"] > 1 * MB and w["pss_bytes_max"] > w["uss_bytes_max"], w
        assert w["rss_bytes_max"] > w["pss_bytes_max"], w  # RSS counts shared pages in full
    main = next(p for p in live["processes"] if p["role"] == "main")
    assert main["cpu_percent_avg"] is not None
    assert live["host"]["cpu_percent_avg"] > 50
    assert live["host"]["memory_used_bytes_max"] > 0
    assert live["gpus"] == [] and live["gpu_note"]
    # the samples are in the recording: a replay reports the same figures
    assert _workers(replay) == workers
    assert replay["host"] == live["host"]


def test_workers_uss_grows_from_copy_on_write_of_python_objects(workloads, tmp_path):
    live, _ = _run(workloads, tmp_path, "cow", "30")
    workers = _workers(live)
    assert len(workers) == 2, live["processes"]
    for w in workers:
        growth = w["uss_bytes_last"] - w["uss_bytes_first"]
        assert growth > 8 * MB, w  # each touched ~half of a ~48 MB list of floats
        assert w["pss_bytes_max"] < w["rss_bytes_max"], w
