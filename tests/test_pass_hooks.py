"""An evaluation between steps runs its model's modules on torch's plain path under
perftop: the global module hooks that watch a pass are out of torch's tables while each of
its top-level forward calls runs (a global hook sends every module call through
``Module._call_impl``'s hooked path: a small model's evaluation took 1.75 times as long),
and no hook of perftop's is left on the job's modules, also after a forward that raised."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.helpers import WORKLOADS, run_and_report
from tests.plainrun import run_plain

JOB = str(WORKLOADS / "pass_hooks.py")


def test_a_pass_runs_its_inner_modules_unhooked_and_leaves_no_module_hook(tmp_path: Path) -> None:
    job = [sys.executable, JOB, "4"]
    plain = run_plain(job, cwd=tmp_path)
    proc, rep = run_and_report(tmp_path, *job)
    assert plain.returncode == proc.returncode == 0, proc.stderr[-2000:]
    a, b = json.loads(plain.stdout), json.loads(proc.stdout)
    assert a["hooks_seen_inside"] == [0] and a["errors"] == 4  # the record is a real one
    # the last evaluation is still open at the loop's end (no step came after it): its
    # global hooks are in torch's tables there, as they were before this change
    a.pop("hooks_after"), b.pop("hooks_after")
    assert b == a
    assert rep["steps"]["count"] == 40
    assert rep["steps"]["between_s"]["eval"]["count"] == 4, rep["steps"]["between_s"]
