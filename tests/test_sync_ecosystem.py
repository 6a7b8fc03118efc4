"""Sync sites and rates as the ecosystem's programs make them (issue 45): one real job
(``workloads/sync_ecosystem.py``, 60 steps) under ``perftop run --headless``, once in
the exact mode (``PERFTOP_SYNC=all``) and once sampled, read back with ``perftop
report`` (JSON and text)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from tests.helpers import WORKLOADS, perftop, run_and_report
from tests.test_sync_e2e import sites_marked

SCRIPT = WORKLOADS / "sync_ecosystem.py"
MARKS = {name: n for n, name in sites_marked(SCRIPT).items()}
LINES = SCRIPT.read_text().splitlines()


def line_of(text: str) -> int:
    return next(n for n, t in enumerate(LINES, 1) if text in t)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:
    out = {}
    for mode in ("all", "sampled"):
        folder = tmp_path_factory.mktemp(mode)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PERFTOP_SYNC", mode)
            proc, rep = run_and_report(folder, sys.executable, str(SCRIPT))
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert rep["steps"]["count"] == 60
        text = perftop("report", str(folder / "r.perftop"), cwd=folder)
        assert text.returncode == 0, text.stderr
        out[mode] = {"report": rep, "text": text.stdout, "rec": folder / "r.perftop"}
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
    assert {(c["line"], c["count"]) for c in site["callers"]} == {
        (MARKS["caller_a"], 29),
        (MARKS["caller_b"], 30),
    }
    assert site["per_step"] == pytest.approx(1.0) and site["every_step"]
    assert site["line"] == site["callers"][0]["line"]  # the most frequent caller names it
    text = runs["all"]["text"]
    assert "ecolib/engine/__init__.py:2" in text and "ecolib/__init__.py" not in text
    name = SCRIPT.name
    assert f"{name}:{MARKS['caller_b']}, {name}:{MARKS['caller_a']} → ecolib" in text


def test_a_value_read_on_the_host_after_cpu_is_no_site(runs):
    """``y = x.cpu(); y.item()``: the wait is at ``.cpu()``; the item reads host memory."""
    rep = runs["all"]["report"]
    assert [e["op"] for e in rows(rep, MARKS["cpu"])] == ["cpu"]
    assert rows(rep, line_of("total += host.item()")) == []


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
