"""Hints on real CPU trainings under `perftop run --headless`."""

from __future__ import annotations

import sys

from tests.helpers import WORKLOADS, run_and_report
from tests.replay_recordings import Run


def test_starved_input_pipeline_gives_input_bound_first_with_workers(
    starved_loader_run: Run,
) -> None:
    # `loader_train.py 320`, run once for the session (tests/replay_recordings.py)
    proc, rep = starved_loader_run.proc, starved_loader_run.report
    assert proc.returncode == 0, proc.stderr
    ids = [h["id"] for h in rep["hints"]]
    assert ids and ids[0] == "input-bound", rep["hints"]
    h = rep["hints"][0]
    assert any("workers make" in e for e in h["evidence"]), h
    assert 0.3 <= h["est_gain"] <= 1.0
    assert "host-device-sync" not in ids and "worker-memory" not in ids


def test_compute_bound_in_memory_loop_gives_none_of_the_three(tmp_path) -> None:
    """On a host loaded by other jobs (four test processes on two cores: the loop waited
    for a core 60% of the time, its own batch loading stretched to 31% of a step) the run
    is not compute-bound; the rules name the crowd (cpu-contention), and it runs again, up
    to three times, for a run where it mostly had a core."""
    for attempt in range(3):
        where = tmp_path / str(attempt)
        where.mkdir()
        proc, rep = run_and_report(where, sys.executable, str(WORKLOADS / "compute_train.py"))
        assert proc.returncode == 0, proc.stderr
        assert rep["steps"]["count"] > 50
        ids = {h["id"] for h in rep["hints"]}
        main = next(p for p in rep["processes"] if p["role"] == "main")
        if (main["core_wait_share_avg"] or 0.0) >= 0.3:
            assert "cpu-contention" in ids, rep["hints"]
            continue
        assert not ids & {"input-bound", "host-device-sync", "worker-memory"}, rep["hints"]
        return


def test_sync_heavy_loss_gives_host_device_sync_naming_its_lines(tmp_path) -> None:
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "sync_loop.py"))
    assert proc.returncode == 0, proc.stderr
    h = next(h for h in rep["hints"] if h["id"] == "host-device-sync")
    text = " ".join(h["evidence"] + h["advice"])
    assert "sync_loop.py:" in text and "nonzero" in text and "torch.where" in text


def test_python_object_dataset_with_workers_gives_worker_memory(tmp_path) -> None:
    proc, rep = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "pyobj_dataset.py"))
    assert proc.returncode == 0, proc.stderr
    h = next(h for h in rep["hints"] if h["id"] == "worker-memory")
    assert any("private memory (USS)" in e for e in h["evidence"])


def test_workers_reading_storage_give_io_bound_naming_the_rate(tmp_path) -> None:
    proc, rep = run_and_report(
        tmp_path, sys.executable, str(WORKLOADS / "io_reader.py"), "workers", str(tmp_path), "8"
    )
    assert proc.returncode == 0, proc.stderr
    h = next((h for h in rep["hints"] if h["id"] == "io-bound"), None)
    assert h is not None, rep["hints"]
    assert any("the loader reads" in e and "/s from storage" in e for e in h["evidence"]), h
    # the whole-run verdict gives it too, though the workers had exited by then (it read
    # their last interval's rate, gone with them: a job too short to be seen live got none)
    assert h["whole_run"], h


def test_the_main_process_reading_beside_its_workers_is_not_io_bound(tmp_path) -> None:
    """Its reads (as a start-up's imports, a logger's or a checkpoint's) are not the
    loader's: the loop waits for workers that read nothing."""
    proc, rep = run_and_report(
        tmp_path, sys.executable, str(WORKLOADS / "io_reader.py"), "main", str(tmp_path), "8"
    )
    assert proc.returncode == 0, proc.stderr
    main = next(p for p in rep["processes"] if p["role"] == "main")
    assert main["io_read_bytes"] > 20 * 2**20  # it did read from storage, during the steps
    ids = [h["id"] for h in rep["hints"]]
    assert "input-bound" in ids and "io-bound" not in ids, rep["hints"]
    assert "IO-bound" not in proc.stderr  # nor live
