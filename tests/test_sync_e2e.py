"""Real CPU trainings under the hook: the sampled detector finds the user's sync sites."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from perftop.monitor.jobenv import RunConfig
from perftop.monitor.runner import Job
from perftop.report.build import build_report, session_from_file
from perftop.report.sync import no_between_lines


def run(tmp_path: Path, script: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    rec = tmp_path / "run.perftop"
    if env:
        import os

        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
    try:
        code = Job(RunConfig((sys.executable, str(script), *args), record=rec)).start().wait()
    finally:
        if env:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    assert code == 0
    return build_report(session_from_file(str(rec)).snapshot(window=None))


def sites_marked(path: Path) -> dict[int, str]:
    """Lines marked ``# SITE name`` in a workload."""
    out = {}
    for n, text in enumerate(path.read_text().splitlines(), 1):
        if "# SITE " in text:
            out[n] = text.split("# SITE ")[1].strip()
    return out


def test_four_sites_with_exact_lines(workloads, recordings):
    script = workloads / "sync_train.py"
    # `perftop run --headless --record` of sync_train.py, made once per session
    report = build_report(session_from_file(str(recordings["sync"])).snapshot(window=None))
    got = {(e["file"], e["line"]): e for e in report["sync_events"]}
    want = {(str(script), n) for n, name in sites_marked(script).items()}
    assert set(got) == want
    ops = {e["op"] for e in got.values()}
    assert ops == {"nonzero", "boolean_mask", "unique", "item"}
    for e in got.values():
        assert e["kind"] == "potential"
        assert e["per_step"] == pytest.approx(1.0)
        assert e["count"] >= 3
        assert set(e) >= {"op", "file", "line", "function", "kind", "count", "per_step"}
    assert {e["function"] for e in got.values()} == {"loss_fn", "<module>"}


def test_clean_script_has_no_sites(tmp_path, workloads):
    # Adam reads its step counter with .item() inside torch: not the user's site.
    report = run(tmp_path, workloads / "sync_train.py", "--clean")
    assert report["steps"]["count"] == 20
    assert report["sync_events"] == []


def test_sites_in_a_helper_module_are_the_helpers_lines(tmp_path, workloads):
    report = run(tmp_path, workloads / "sync_train.py", "--helpers")
    helper = workloads / "sync_helpers.py"
    got = {(Path(e["file"]).name, e["line"], e["op"]) for e in report["sync_events"]}
    marks = {name: n for n, name in sites_marked(helper).items()}
    assert ("sync_helpers.py", marks["helper_nonzero"], "nonzero") in got
    assert ("sync_helpers.py", marks["helper_mask"], "boolean_mask") in got
    assert not any(f == "sync_train.py" and op in ("nonzero", "boolean_mask") for f, _, op in got)


def test_off_switch(tmp_path, workloads):
    report = run(tmp_path, workloads / "sync_train.py", env={"PERFTOP_SYNC": "off"})
    assert report["steps"]["count"] == 20
    assert report["sync_events"] == []


def test_only_device_tensors_and_between_step_syncs_per_pass(tmp_path, workloads):
    """Host index tensors (randint into a numpy memmap) are no sync; an evaluation pass's
    syncs are reported per pass, apart from the steps' own, a final test's too."""
    script = workloads / "sync_shapes.py"
    report = run(tmp_path, script, env={"PERFTOP_SYNC": "all"})
    marks = {name: n for n, name in sites_marked(script).items()}
    assert report["steps"]["count"] == 30
    got = [(e["line"], e["op"], e["kind"]) for e in report["sync_events"]]
    assert got == [(marks["step_item"], "item", "potential")]
    (step_site,) = report["sync_events"]
    assert step_site["per_step"] == pytest.approx(1.0, abs=0.05)
    (pass_site,) = report["sync_between"]
    assert (pass_site["line"], pass_site["op"]) == (marks["eval_item"], "item")
    # passes after steps 0, 10 and 20 and a final one after the last, EVAL_BATCHES (4)
    # reads each (the final one's are sent at exit: no later step end flushes them)
    assert pass_site["passes"] == 4 and pass_site["count"] == 16
    assert pass_site["per_pass"] == pytest.approx(4.0)
    assert "per_step" not in pass_site


def test_an_evaluation_waiting_off_the_cpu_is_watched_whole(tmp_path, workloads):
    """The default (sampled) mode: passes watched on their own draw, their budget in the
    training thread's CPU time. An evaluation of 4 batches that each wait 0.1 s for their
    read (0.4 s of wall time, a few ms on the CPU) outran a budget kept in wall time: the
    first watch was cut at 0.25 s and dropped, and the second found no room."""
    script = workloads / "sync_shapes.py"
    report = run(tmp_path, script, "0.1", env={"PERFTOP_SYNC_SEED": "1"})
    marks = {name: n for n, name in sites_marked(script).items()}
    assert report["steps"]["count"] == 30
    (pass_site,) = report["sync_between"]
    assert (pass_site["line"], pass_site["op"]) == (marks["eval_item"], "item")
    assert pass_site["passes"] >= 2 and pass_site["per_pass"] == pytest.approx(4.0)


def test_a_jobs_own_mode_around_the_optimizer_step(tmp_path, workloads):
    """perftop's detector starts and stops inside ``opt.step()``; the job's own mode
    around it stays on top in its block and is gone after (the job checks: exit 3)."""
    script = workloads / "sync_user_mode.py"
    report = run(tmp_path, script, env={"PERFTOP_SYNC": "all"})
    assert report["steps"]["count"] == 40
    line = next(iter(sites_marked(script)))
    assert [(e["line"], e["op"]) for e in report["sync_events"]] == [(line, "item")]


def test_a_final_pass_with_no_sync_watched_to_the_exit(tmp_path, workloads):
    """Every step watched (PERFTOP_SYNC=all), a final evaluation with no sync, then the
    exit: the pass was watched whole and none was seen in it. It read "no pass of the 1
    watched whole: a watch has a budget ... (PERFTOP_SYNC=all watches every one)": the
    exit flushed a final pass's syncs only, and it had none."""
    report = run(tmp_path, workloads / "final_quiet_pass.py", env={"PERFTOP_SYNC": "all"})
    assert report["steps"]["count"] == 30
    assert report["sync_between"] == []
    w = report["sync_watch"]
    assert (w["passes_watched"], w["passes_run"]) == (1, 1), w
    assert no_between_lines(report)[-1] == "  none seen in the 1 pass watched whole of 1"
