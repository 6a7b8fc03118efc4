"""Sync sites and rates as the ecosystem's programs make them (issue 45): one real job
(``workloads/sync_ecosystem.py``, 60 steps) under ``perftop run --headless``, once in
the exact mode (``PERFTOP_SYNC=all``) and once sampled, read back with ``perftop
report`` (JSON and text). Both runs at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import WORKLOADS, perftop
from tests.test_sync_e2e import sites_marked

SCRIPT = WORKLOADS / "sync_ecosystem.py"
MARKS = {name: n for n, name in sites_marked(SCRIPT).items()}
LINES = SCRIPT.read_text().splitlines()


def line_of(text: str) -> int:
    return next(n for n, t in enumerate(LINES, 1) if text in t)


def _perftop(folder: Path, mode: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "perftop", *args], cwd=folder, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        env={**os.environ, "PERFTOP_SYNC": mode})  # fmt: skip


def _done(p: subprocess.Popen[str]) -> tuple[str, str]:
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, err[-2000:]
    return out, err


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:
    """Both modes at once, and their reports (JSON and text) at once."""
    folders = {mode: tmp_path_factory.mktemp(mode) for mode in ("all", "sampled")}
    jobs = {
        mode: _perftop(f, mode, "run", "--headless", "--record", str(f / "r.perftop"), "--",
                       sys.executable, str(SCRIPT))
        for mode, f in folders.items()
    }  # fmt: skip
    try:
        for job in jobs.values():
            _done(job)
        reports = {
            mode: (_perftop(f, mode, "report", "--json", str(f / "r.perftop")),
                   _perftop(f, mode, "report", str(f / "r.perftop")))
            for mode, f in folders.items()
        }  # fmt: skip
        out = {}
        for mode, (as_json, as_text) in reports.items():
            rep = json.loads(_done(as_json)[0])
            assert rep["steps"]["count"] == 60
            rec = folders[mode] / "r.perftop"
            out[mode] = {"report": rep, "text": _done(as_text)[0], "rec": rec}
    finally:
        for p in jobs.values():
            if p.poll() is None:
                p.kill()
    return out


def rows(rep: dict[str, Any], line: int, op: str | None = None) -> list[dict[str, Any]]:
    return [
        e
        for e in rep["sync_events"]
        if line in {e["line"], *(c["line"] for c in e.get("callers", ()))} and op in (None, e["op"])
    ]


def test_a_log_on_the_first_iterations_reads_its_rate_within_its_error(runs):
    """Formats on iterations 1-4 of 60 (ignite's log): the fixed draw read them 3.79
    ±1.57 a step in every run, for 0.41; each session draws its steps, the first steps
    count as themselves, and the rate is within two stated errors of the exact one."""
    (exact,) = rows(runs["all"]["report"], MARKS["first"], "format")
    (sampled,) = rows(runs["sampled"]["report"], MARKS["first"], "format")
    assert exact["per_step"] == pytest.approx(24 / 59, abs=0.01)
    err = sampled["per_step_error"]
    assert err > 0 and abs(sampled["per_step"] - exact["per_step"]) <= 2 * err, sampled
    assert exact["per_step_error"] == 0 and not exact["every_step"]


def test_a_site_in_every_step_says_so_with_its_count(runs):
    (every,) = rows(runs["all"]["report"], MARKS["every"], "item")
    assert every["every_step"] and every["per_step"] == pytest.approx(1.0)
    row = next(
        ln
        for ln in runs["all"]["text"].splitlines()
        if ln.startswith(f"  {SCRIPT.name}:{MARKS['every']} ")  # the sync table's row
    )
    assert "every step ×1.00" in row and "±" not in row


def test_one_library_line_from_two_user_lines_is_one_site(runs):
    """skorch's ``net.py`` line read as two sites, ":64 about 1 in 1 steps" and ":39
    0.00 ±0.21": one site, its callers listed, its rate theirs summed; its file named
    from its package's folder, not as the package's own ``__init__.py``."""
    rep = runs["all"]["report"]
    (site,) = [e for e in rep["sync_events"] if e["lib_line"] == 2]
    assert site["lib_file"].endswith("ecolib/engine/__init__.py")
    # 30 calls each: the last iteration's (caller_a's), after the last optimizer step, too
    assert {(c["line"], c["count"]) for c in site["callers"]} == {
        (MARKS["caller_a"], 30),
        (MARKS["caller_b"], 30),
    }
    assert site["per_step"] == pytest.approx(1.0) and site["every_step"]
    assert site["line"] == site["callers"][0]["line"]  # the most frequent caller names it
    text = runs["all"]["text"]
    assert "ecolib/engine/__init__.py:2" in text and "ecolib/__init__.py" not in text
    name = SCRIPT.name
    # (a tie: the first line first)
    assert f"{name}:{MARKS['caller_a']}, {name}:{MARKS['caller_b']} → ecolib" in text


def test_a_value_read_on_the_host_after_cpu_is_no_site(runs):
    """``y = x.cpu(); y.item()``: the wait is at ``.cpu()``; the item reads host memory."""
    rep = runs["all"]["report"]
    assert [e["op"] for e in rows(rep, MARKS["cpu"])] == ["cpu"]
    assert rows(rep, line_of("total += host.item()")) == []


@pytest.mark.parametrize("mode", ["all", "sampled"])
def test_a_host_copy_from_cpu_is_no_site(runs, mode):
    """What is computed on the host from ``.cpu()``'s copy (``bool(host > 0)``) waits for
    nothing: ``.cpu()`` is the site. The true sites stay, at their rates. (ignite's host
    batch kept beside its copy, ``batch[0].mean().item()``, is reported on CPU: there
    ``.to(device)`` returns the batch itself, and a loop trains on what it sent.)"""
    rep = runs[mode]["report"]
    assert rows(rep, line_of("bool(host > 0)")) == []
    assert [e["op"] for e in rows(rep, MARKS["cpu"])] == ["cpu"]
    (every,) = rows(rep, MARKS["every"], "item")  # the true site, in each watched step
    assert every["count"] >= 3 and every["seen_steps"] >= every["watched_steps"] - 1


def test_a_slice_holds_its_own_evaluations_only(runs, tmp_path):
    """``--from-step 1 --to-step 3`` said "3 steps … eval (3×)": the steps were sliced,
    the time between them not. Evaluations follow steps 20, 40 and 60."""
    rec = str(runs["all"]["rec"])

    def part(*args: str) -> dict[str, Any]:
        r = perftop("report", "--json", *args, rec, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    assert runs["all"]["report"]["steps"]["between_s"]["eval"]["count"] == 3
    first = part("--from-step", "1", "--to-step", "10")
    assert first["steps"]["count"] == 10 and first["steps"]["between_s"] == {}
    mid = part("--from-step", "15", "--to-step", "25")
    assert mid["steps"]["count"] == 11 and mid["steps"]["between_s"]["eval"]["count"] == 1
    (every,) = rows(mid, MARKS["every"], "item")  # the sync sites are the slice's too
    assert every["count"] == 11 and every["per_step"] == pytest.approx(1.0)


def test_the_processes_table_names_each_process(runs):
    """The text report's Processes table said only "main"/"other": it names what each
    process runs (a Ray Train run listed 16 anonymous rows)."""
    text = runs["all"]["text"]
    table = text.split("Processes\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert "command" in table[0].split()
    assert any(" main " in row and SCRIPT.name in row for row in table[1:]), table
