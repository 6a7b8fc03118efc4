"""`perftop run` on real CPU trainings: steps found, workers named, exit codes kept."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from perftop.model.snapshot import ended_words
from tests.helpers import WORKLOADS, perftop, run_and_report
from tests.replay_recordings import Run


def test_dataloader_workers_bottleneck(starved_loader_run: Run):
    # `loader_train.py 320`, run once for the session (the hints tests read it too)
    proc, r = starved_loader_run.proc, starved_loader_run.report
    assert proc.returncode == 0, proc.stderr
    assert "trained 320" in proc.stdout  # the job's own output reaches the user unchanged
    assert r["steps"]["count"] == 320
    assert r["steps"]["data_wait_fraction"] > 0.5  # the workers are the bottleneck
    assert set(r["steps"]["phases_s"]) == {"data", "forward/other", "backward", "optimizer"}
    (loader,) = r["loaders"]
    assert loader["num_workers"] == 2 and loader["batch_size"] == 4
    # the default context's workers: read off multiprocessing, which their start fixed
    assert loader["start_method"] == "fork" and loader["starts"] == 1, loader
    workers = {p["worker_id"]: p["pid"] for p in r["processes"] if p["role"] == "worker"}
    assert sorted(workers) == [0, 1]
    assert sorted(workers.values()) == sorted(w["pid"] for w in loader["workers"])
    (main,) = [p for p in r["processes"] if p["role"] == "main"]
    assert main["pid"] not in workers.values()
    assert r["exit_code"] == 0 and r["dropped_events"] == 0


@pytest.mark.parametrize(
    # (no_loader.py: the shell test below runs it)
    ("script", "steps", "phases"),
    [
        ("manual_sgd.py", 15, {"data", "forward/other", "backward"}),
        ("explicit_api.py", 10, {"data", "forward/other", "backward", "optimizer"}),
    ],
)
def test_steps_found_without_optimizer_or_loader(tmp_path, script, steps, phases):
    """Steps closed by backward() with no torch.optim step have no optimizer phase: the
    hand-written update is in forward/other, not an optimizer said to take 0 s (a
    step marked with perftop.step() may hold a torch.optim step: timed, here 0 s)."""
    proc, r = run_and_report(tmp_path, sys.executable, str(WORKLOADS / script))
    assert proc.returncode == 0, proc.stderr
    assert r["steps"]["count"] == steps
    assert r["steps"]["step_time_s"]["p50"] > 0
    assert set(r["steps"]["phases_s"]) == phases, r["steps"]
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    assert ("no torch.optim step" in text) == ("optimizer" not in phases), text


@pytest.mark.parametrize("explicit", [False, True])
def test_skipped_updates_and_explicit_steps(tmp_path, explicit):
    """A GradScaler that skips an update calls no optimizer step: that iteration is part of
    the next step (steps are updates, docs/steps.md). With ``perftop.step()`` at each
    iteration's end, one step a call: the first call, after the optimizer's step had
    closed the first step, ends no extra one."""
    args = ["explicit"] if explicit else []
    proc, r = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "skipped_updates.py"),
                             *args)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    counts = {k: int(v) for k, v in zip(words[::2], words[1::2])}
    assert counts["iterations"] == 60 and counts["skipped"] == 10, proc.stdout
    expected = counts["iterations"] if explicit else counts["updates"]
    assert r["steps"]["count"] == expected, r["steps"]
    assert "optimizer" in r["steps"]["phases_s"]


def test_shell_script_reaches_python(tmp_path):
    proc, r = run_and_report(tmp_path, str(WORKLOADS / "train.sh"))
    assert proc.returncode == 0, proc.stderr
    assert "from the shell" in proc.stdout
    assert r["steps"]["count"] == 20  # no_loader.py's: no DataLoader, an optimizer
    assert r["steps"]["step_time_s"]["p50"] > 0


def test_python_module(tmp_path):
    proc, r = run_and_report(
        tmp_path,
        sys.executable,
        "-m",
        "perftop.demo.train",
        "--scenario",
        "sync",
        "--steps",
        "6",
        "--workers",
        "0",
    )
    assert proc.returncode == 0, proc.stderr
    assert r["steps"]["count"] == 6
    # The bundled demo is user code although it ships inside perftop: its loss's sync
    # points are sites, at its own lines.
    sites = {(e["op"], Path(e["file"]).name) for e in r["sync_events"]}
    assert {("boolean_mask", "train.py"), ("unique", "train.py"), ("nonzero", "train.py")} <= sites


@pytest.mark.parametrize("code", [0, 3, 77, 137])
def test_exit_code_propagates(tmp_path, code):
    proc, r = run_and_report(tmp_path, sys.executable, "-c", f"import sys; sys.exit({code})")
    assert proc.returncode == code
    assert r["exit_code"] == code
    assert r["exit_signal"] is None  # exit(137) is an exit: no signal killed it
    assert f"perftop: exited ({code})," in proc.stderr, proc.stderr


def test_signal_death_is_128_plus_signal(tmp_path):
    """Said killed from the job's wait status (its code alone could be an exit(137))."""
    proc, r = run_and_report(
        tmp_path, sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    )
    assert proc.returncode == 128 + 9
    assert r["exit_code"] == 137 and r["exit_signal"] == "SIGKILL"
    assert "perftop: killed (SIGKILL)," in proc.stderr, proc.stderr  # the headless summary
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    assert "killed by SIGKILL (exit code 137)" in text.splitlines()[1], text


def test_how_a_job_ended_in_words():
    """The TUI's notice and the line after it (``perftop run``)."""
    assert ended_words(137, 9) == "was killed by SIGKILL (exit code 137)"
    assert ended_words(137, 0) == "exited with code 137"
    assert ended_words(200, 72) == "was killed by signal 72 (exit code 200)"  # no such signal
