"""The text report's Processes table: a loader's workers started anew each epoch are one
row per place (host, rank, parent, loader, worker index) from three processes on, their
figures taken together; fewer, other roles and other places stay rows of their own."""

from __future__ import annotations

import json
import sys

from perftop.report.proc_groups import grouped
from tests.helpers import WORKLOADS, perftop, run_and_report


def proc(pid: int, worker: int | None, loader: int | None = 0, **kw: object) -> dict:
    role = "main" if worker is None else "worker"
    return {"pid": pid, "role": role, "rank": kw.pop("rank", None), "worker_id": worker,
            "loader_id": loader, "parent_pid": kw.pop("parent", 1), "host": "",
            "cpu_percent_avg": kw.pop("avg", 5.0), "cpu_percent_max": kw.pop("top", 9.0),
            "rss_bytes_max": 100, "pss_bytes_max": 50, "uss_bytes_first": pid,
            "uss_bytes_last": pid + 1, "io_read_bytes": 10, "io_write_bytes": None, **kw}  # fmt: skip


def test_three_generations_of_a_worker_are_one_row() -> None:
    procs = [
        proc(1, None),
        *[proc(10 + e * 10, 0, avg=2.0 + e, top=4.0 + e) for e in range(3)],  # worker 0, L0
        *[proc(11 + e * 10, 1) for e in range(3)],  # worker 1, L0
        proc(50, 0, loader=1),  # another loader's worker 0: twice only
        proc(60, 0, loader=1),
        proc(70, 0, rank=1, parent=2),  # another rank's
    ]
    rows = grouped(procs)
    assert [r["pid"] for r in rows] == [1, 10, 11, 50, 60, 70]
    w0 = rows[1]
    assert w0["processes"] == 3 and w0["cpu_percent_avg_range"] == (2.0, 4.0)
    assert w0["cpu_percent_max"] == 6.0 and w0["io_read_bytes"] == 30
    assert w0["io_write_bytes"] is None  # never measured: absent, not 0
    assert (w0["uss_bytes_first"], w0["uss_bytes_last"]) == (10, 31)  # first's, last's
    assert rows[2]["processes"] == 3
    assert all("processes" not in r for r in rows[3:]) and "processes" not in rows[0]


def test_without_restarts_nothing_changes() -> None:
    procs = [proc(1, None), proc(2, 0), proc(3, 1)]
    assert grouped(procs) == procs


def test_a_process_the_probes_never_saw_is_said_to_be_so() -> None:
    """A loader's worker known from the hook only (it ended before the probes' first look,
    a short evaluation's): its N/A columns get their reason below the table; a process
    seen once (no CPU figure yet) is no such row."""
    from perftop.report.probes_json import PROC_KEYS
    from perftop.report.text_probes import processes_table

    seen_once = {**proc(3, 1, name="python", cpu_percent_avg=None, cpu_percent_max=None)}
    assert "never saw" not in processes_table([proc(1, None, name="python"), seen_once], [])
    never = {**proc(2, 0, loader=3), **dict.fromkeys(PROC_KEYS), "name": "", "cmdline": ""}
    text = processes_table([proc(1, None, name="python"), never], [])
    row = next(ln for ln in text.splitlines() if ln.split()[:1] == ["2"])
    assert row.count("N/A") == 8, row
    assert "N/A in every column: the probes never saw that process" in text


def test_the_workers_of_a_run_of_loaders_made_anew_are_one_row_per_worker_index() -> None:
    """The HF Trainer's evaluation makes a new DataLoader each time: the workers of a run
    of them (loader_runs.py) are one row per worker index across the loaders, named by the
    run; its figures are those the probes read (the first worker ended unseen); the
    training loader's workers stay rows of their own."""
    from perftop.report.loader_runs import runs_of
    from perftop.report.probes_json import PROC_KEYS
    from perftop.report.text_probes import processes_table

    def loader(i: int, head: int | None) -> dict:
        return {"pid": 1, "loader_id": i, "host": "", "remade_from": head}

    loaders = [loader(0, None), *(loader(i, 1) for i in (1, 2, 3)), loader(4, None)]
    unseen = {**dict.fromkeys(PROC_KEYS), "name": "", "cmdline": ""}
    procs = [
        proc(1, None, name="python"),
        proc(2, 0, name="python"),  # the training loader's worker 0
        {**proc(10, 0, loader=1), **unseen},
        proc(12, 0, loader=2, name="python", avg=7.0),
        proc(13, 1, loader=2, name="python"),
        proc(14, 0, loader=3, name="python", avg=3.0),
        proc(20, 0, loader=4, name="python"),  # another loader, in no run
    ]
    rows = grouped(procs, runs_of(loaders))
    assert [r["pid"] for r in rows] == [1, 2, 10, 13, 20]
    run0 = rows[2]
    assert run0["processes"] == 3 and run0["loader_run"] == "L1–L3"
    assert run0["cpu_percent_avg_range"] == (3.0, 7.0) and run0["name"] == "python"
    assert (run0["uss_bytes_first"], run0["uss_bytes_last"]) == (12, 15)  # those read
    text = processes_table(procs, loaders)
    assert any(ln.split()[:2] == ["3", "pids"] and "0·L1–L3" in ln for ln in text.splitlines())
    assert "never saw" not in text  # the row's other pids were seen


def test_a_pool_made_anew_each_epoch_is_one_row_per_place_in_it(tmp_path):
    """A loop fed by a pool of 2 processes made anew each epoch (as Keras's PyDataset
    workers are) beside a pool of 2 kept for the run, all forked from the script: the
    epochs' 6 processes are 2 rows of 3 (a slot of the pool each), the kept pool's stay a
    row each (they ran beside the others), and --json keeps every process with when the
    probes first and last saw it."""
    proc, r = run_and_report(tmp_path, sys.executable, str(WORKLOADS / "epoch_pool.py"))
    assert proc.returncode == 0, proc.stderr
    own = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["steps"]["count"] == own["steps"] == 24
    others = {p["pid"]: p for p in r["processes"] if p["role"] == "other"}
    assert set(own["kept"]) | set(own["epochs"]) <= set(others), (own, sorted(others))
    assert len(own["kept"]) == 2 and len(own["epochs"]) == 6, own
    for pid in own["kept"] + own["epochs"]:
        p = others[pid]
        assert p["first_seen_t"] is not None and p["first_seen_t"] <= p["last_seen_t"], p
    text = perftop("report", str(tmp_path / "r.perftop"), cwd=tmp_path).stdout
    table = text.split("\nProcesses\n", 1)[1].split("\n\n", 1)[0].splitlines()
    rows = [row.split() for row in table[1:] if "other" in row.split()[:3]]
    assert sorted(row[0] for row in rows if row[1] == "pids") == ["3", "3"], table
    single = {int(row[0]) for row in rows if row[1] != "pids"}
    assert set(own["kept"]) <= single and not single & set(own["epochs"]), table
    assert any("a pool made each epoch" in row for row in table), table
