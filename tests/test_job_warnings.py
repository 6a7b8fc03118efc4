"""Torch's warnings in the steps the sync detector watches read as in a plain run: at the
job's own line, filtered by the job's own module, shown once per line (a function mode
makes each torch call itself: from its own frame they read perftop's file and module)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers import WORKLOADS, run_and_report
from tests.plainrun import run_plain

JOB = str(WORKLOADS / "warn_sites.py")


def _job_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln and not ln.startswith("perftop:")]


def test_torch_warnings_in_watched_steps_read_the_jobs_lines(tmp_path: Path) -> None:
    job = [sys.executable, JOB, "6"]
    plain = run_plain(job, cwd=tmp_path)
    proc, rep = run_and_report(tmp_path, *job)
    assert plain.returncode == proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == plain.stdout
    said = _job_lines(plain.stderr)
    # the record is a real one: two warnings, each at the job's own line, the third hidden
    assert sum("UserWarning" in ln for ln in said) == 2, plain.stderr
    assert all(ln.startswith(JOB) for ln in said if "UserWarning" in ln), plain.stderr
    assert _job_lines(proc.stderr) == said, proc.stderr
    # those steps were watched: the detector saw the job's scalar reads at that line
    sites = {(s["file"], s["op"]) for s in rep["sync_events"]}
    assert (JOB, "float") in sites, rep["sync_events"]


def test_a_torch_error_in_a_watched_step_names_the_jobs_line_once(tmp_path: Path) -> None:
    """The frame that makes the call from the job's line is not a second copy of it."""
    script = tmp_path / "crash.py"
    script.write_text(
        "import torch\n"
        "model = torch.nn.Linear(8, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "x = torch.randn(4, 8)\n"
        "for step in range(5):\n"
        "    model(x).sum().backward()\n"
        "    opt.step()\n"
        "    opt.zero_grad()\n"
        "    if step == 2:\n"
        "        torch.mm(x, x)\n"
    )
    proc, _ = run_and_report(tmp_path, sys.executable, str(script))
    assert proc.returncode == 1
    lines = _job_lines(proc.stderr)
    assert lines[-1].startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert sum(f'"{script}", line 10' in ln for ln in lines) == 1, proc.stderr
