"""Sync sites and torch.compile under real frameworks, each a real `perftop run` of a
training subprocess: the sites are the test workload's own lines (a library's sync is
reported at the user's line that led into it, the library line kept as detail), and a
compiled model compiles the same graphs with and without perftop."""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

from perftop.hints import hinted_session
from perftop.recording import read_events
from perftop.report.diff import figures
from perftop.report.text import render as render_text
from tests.helpers import WORKLOADS, perftop, run_and_report
from tests.plainrun import run_plain

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def marked(path: Path, tag: str) -> dict[int, str]:
    """Lines of a workload marked ``# <tag> name`` (or just ``# <tag>``)."""
    out = {}
    for n, text in enumerate(path.read_text().splitlines(), 1):
        if f"# {tag}" in text:
            out[n] = text.split(f"# {tag}")[1].strip()
    return out


def check_sites(report: dict, script: Path, package: str) -> list[dict]:
    sites = report["sync_events"]
    assert sites, "no sync sites seen"
    own = {(e["line"], e["op"]) for e in sites if e["lib_file"] is None}
    # the user's own lines, each with its op, and never a library's line
    assert own >= {(n, op) for n, op in marked(script, "SITE").items()}
    for e in sites:
        assert e["file"] == str(script), e  # every site is the user's file
        assert set(e) >= {"op", "file", "line", "function", "kind", "count", "per_step"}
        assert e["blocked_s"] is None  # a CPU run: nothing waited for a device
        assert e["kind"] == "potential"
        if e["lib_file"] is not None:  # through the library, whose line is kept
            assert e["package"] == package and f"{os.sep}{package}{os.sep}" in e["lib_file"]
            assert isinstance(e["lib_line"], int) and e["lib_function"]
    return sites


def test_hf_trainer_sites_are_the_users_lines(tmp_path, monkeypatch):
    script = WORKLOADS / "hf_sync.py"
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PERFTOP_SYNC", "all")  # every step: the Trainer logs every 2nd
    proc, report = run_and_report(tmp_path, sys.executable, str(script), str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    sites = check_sites(report, script, "transformers")
    (train,) = marked(script, "TRAIN")
    via = [e for e in sites if e["line"] == train]
    assert via and all(e["lib_file"] for e in via)  # the Trainer's own syncs
    # the exports carry the library detail too
    rec, trace = tmp_path / "r.perftop", tmp_path / "t.json"
    assert perftop("export", str(rec), "--chrome-trace", str(trace), cwd=tmp_path).returncode == 0
    marks = [
        e["args"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "sync"
    ]
    assert {(m["line"], m.get("lib_line")) for m in marks} == {
        (e["line"], e["lib_line"]) for e in sites
    }
    assert perftop("export", str(rec), "--csv", str(tmp_path / "csv"), cwd=tmp_path).returncode == 0
    with open(tmp_path / "csv" / "sync_sites.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {(int(r["line"]), r["package"]) for r in rows} == {
        (e["line"], e["package"] or "") for e in sites
    }


def test_lightning_sites_are_the_users_lines(tmp_path):
    script = WORKLOADS / "lightning_sync.py"
    proc, report = run_and_report(tmp_path, sys.executable, str(script), str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    check_sites(report, script, "lightning")


def counters(out: str) -> dict:
    (line,) = [ln for ln in out.splitlines() if ln.startswith("COUNTERS ")]
    return json.loads(line.split(" ", 1)[1])


def _compiles_the_same(tmp_path: Path, *args: str) -> list[str]:
    """compiled.py plainly and under perftop: one graph, no break, the same counters, the
    detector stepped aside and the steps still measured; the notes."""
    script = str(WORKLOADS / "compiled.py")
    plain = run_plain([sys.executable, script, *args], timeout=180, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr[-2000:]
    proc, report = run_and_report(tmp_path, sys.executable, script, *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    want, got = counters(plain.stdout), counters(proc.stdout)
    assert want["unique_graphs"] == 1 and want["graph_breaks"] == 0
    assert got == want
    notes = [n["text"] for n in report["notes"]]
    assert any("sync detection paused: torch.compile" in t for t in notes), notes
    assert report["steps"]["count"] >= 10  # still measured
    # the model keeps why the detector stopped looking: the Sync panel says so, not "none"
    session = hinted_session()
    session.apply_all(read_events(tmp_path / "r.perftop"))
    snap = session.snapshot(window=None)
    watch = snap.sync_watch
    assert watch.paused.startswith("torch.compile is in use"), watch
    assert report["sync_watch"] == {
        "watched_steps": watch.watched,
        "paused": watch.paused,
        "passes_watched": watch.passes,
        "passes_run": snap.passes_run,
    }
    if not report["sync_events"]:  # and the text report, where it lists no site
        assert f"detection paused: {watch.paused}" in render_text(report)
    # `perftop diff`'s figures: a count the detector never looked for is N/A, not 0
    potential = figures(snap, report, None)["potential_count"][0]
    assert (potential is None) == (watch.watched == 0), potential
    return notes


def test_compiled_model_compiles_the_same_graphs_under_perftop(tmp_path):
    _compiles_the_same(tmp_path)


def test_a_function_compiled_in_a_watched_step_compiles_the_same(tmp_path, monkeypatch):
    """``torch.compile(fn)``, first called in step 4 with the detector's mode on the stack
    (the exact mode watches every step): dynamo's start callback takes the mode off before
    dynamo snapshots the function-mode stack, so the same graphs compile, with no break,
    and the detector says it steps aside."""
    monkeypatch.setenv("PERFTOP_SYNC", "all")  # the plain run does not read it
    notes = _compiles_the_same(tmp_path, "--fn")
    assert not any("did not find its TorchFunctionMode" in t for t in notes), notes
