"""The whole-run verdict on real CPU trainings too short for the live engine (a few
seconds): `perftop report` gives each workload's hints, says where they come from, gives
the same report for the same recording, and stays quiet on the near-miss workloads."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perftop.model.snapshot import Hint
from tests.helpers import WORKLOADS, perftop

CASES = str(WORKLOADS / "hint_cases.py")


def record(
    tmp_path: Path, case: str, *env: str, steps: int | None = None
) -> tuple[Path, dict[str, Any]]:
    rec, rep, _ = record_run(tmp_path, case, *env, steps=steps)
    return rec, rep


def record_run(
    tmp_path: Path, case: str, *env: str, steps: int | None = None
) -> tuple[Path, dict[str, Any], str]:
    """Run a case under `perftop run --headless`: its recording, report and own output."""
    rec = tmp_path / f"{case}.perftop"
    n = () if steps is None else (str(steps),)
    run = perftop(
        "run", "--headless", "--record", str(rec), "--", "env", *env, sys.executable, CASES,
        case, *n, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    rep = perftop("report", "--json", str(rec), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    return rec, json.loads(rep.stdout), run.stdout


def test_short_starved_run_gets_its_hints_from_the_whole_run_verdict(tmp_path: Path) -> None:
    rec, rep = record(tmp_path, "starved")
    assert rep["steps"]["count"] >= 150
    hints = {h["id"]: h for h in rep["hints"]}
    assert {"input-bound", "host-device-sync"} <= set(hints), rep["hints"]
    for h in hints.values():
        assert h["whole_run"] is True and h["source"].endswith("whole-run")
        assert h["source"] == ("live+whole-run" if h["seen_live"] else "whole-run")
        assert h["active"] == (h["seen_live"] and h["until_s"] is None)
    ib = hints["input-bound"]  # the advised workers' gain: at most the data wait
    assert 0 < ib["est_gain"] <= rep["steps"]["data_wait_fraction"] + 0.05
    # a worker's gain where one would find a core; on a loaded host whose cores other
    # processes hold (four test processes on 2 cores), the whole data wait as a bound
    held = any("a worker process would" in e for e in ib["evidence"])
    assert ("if every batch were ready" if held else "with num_workers=") in ib["est_gain_text"]
    assert any("num_workers=0" in e for e in hints["input-bound"]["evidence"])
    # the same recording, the same report (the text one says where each hint comes from)
    again = perftop("report", "--json", str(rec), cwd=tmp_path)
    assert json.loads(again.stdout) == rep
    text = perftop("report", str(rec), cwd=tmp_path).stdout
    assert "whole-run verdict" in text and "Input-bound" in text


def test_near_miss_run_gives_neither_hint(tmp_path: Path) -> None:
    """Data wait ~10% of a step (bar: 30%), 0.9 syncs a step (bar: 1), on every step."""
    _, rep = record(tmp_path, "near", "PERFTOP_SYNC=all")
    assert rep["steps"]["count"] >= 150
    per_step = sum(s["per_step"] for s in rep["sync_events"])
    assert 0.8 <= per_step < 1.0, rep["sync_events"]
    assert rep["steps"]["data_wait_fraction"] < 0.3
    ids = {h["id"] for h in rep["hints"]}
    assert not ids & {"input-bound", "host-device-sync"}, rep["hints"]


def test_a_producer_threads_waiting_gives_no_input_bound(tmp_path: Path) -> None:
    """A thread fills a queue from the DataLoader; the loop waits for it under 1% of the
    time (it prints its own figure): no input-bound (issue 18's data wait of the training
    thread, read by the rule)."""
    _, rep = record(tmp_path, "producer")
    ids = {h["id"] for h in rep["hints"]}
    assert "input-bound" not in ids, rep["hints"]


def test_evaluation_between_steps_gives_between_steps_with_the_jobs_own_time(
    tmp_path: Path,
) -> None:
    """A no_grad evaluation over in-memory tensors, 6 passes of 2 s among 96 steps of
    20 ms: the report's eval time is the job's own timer's, and between-steps names it. (The
    passes sleep: on a busy host the job's start, its imports, stretches and theirs does
    not; with passes of 1.1 s the run's share outside steps fell under the hint's 20%.)"""
    _, rep, out = record_run(tmp_path, "between", steps=96)
    own = next(line.split() for line in out.splitlines() if line.startswith("own evals"))
    evals, spent = int(own[2]), float(own[3])
    assert rep["steps"]["count"] == 96
    ev = rep["steps"]["between_s"]["eval"]
    assert ev["count"] == evals == 6
    assert abs(ev["total_s"] - spent) < 0.1 * spent, (ev, spent)
    hints = {h["id"]: h for h in rep["hints"]}
    assert "between-steps" in hints, rep["hints"]
    assert any("evaluation" in e and "6 intervals" in e for e in hints["between-steps"]["evidence"])


def test_the_verdict_reads_the_disks_over_the_run_not_their_last_sample(tmp_path: Path) -> None:
    """The bundled demo recording (a real run): its last host sample, taken as the job shut
    down, read the disk 100% busy moving no byte, and the verdict said "IO-bound [high]"
    of a job whose workers were 90% on the CPU. Over the run the disk was 13% busy: no
    io-bound, even where that last second had read 30 MiB. The same run with its disk busy
    and reading in every sample keeps it."""
    from dataclasses import replace

    from perftop.events import HostSample
    from perftop.hints.verdict import verdict
    from perftop.model.session import Session
    from perftop.recording import read_events

    demo = Path(__file__).parents[1] / "screenshots" / "demo.perftop"
    events = list(read_events(demo))
    host = [e for e in events if isinstance(e, HostSample)]
    assert (host[-1].disk_busy_percent, host[-1].disk_read, host[-1].disk_write) == (100.0, 0, 0)
    rep = json.loads(perftop("report", "--json", str(demo), cwd=tmp_path).stdout)
    assert "io-bound" not in [h["id"] for h in rep["hints"]], rep["hints"]
    run = [e.disk_busy_percent for e in host if e.disk_busy_percent is not None]
    assert rep["host"]["disk_busy_percent_avg"] == round(sum(run) / len(run), 2) < 15

    def hints(busy: Callable[[HostSample], bool]) -> dict[str, Hint]:
        s = Session()
        for e in events:
            if isinstance(e, HostSample) and e.disk_read is not None and busy(e):
                e = replace(e, disk_busy_percent=90.0, disk_read=int(30 * 2**20 * e.dt))
            s.apply(e)
        return {h.id: h for h in verdict(s.snapshot(window=None))}

    assert "io-bound" not in hints(lambda e: e is host[-1])
    found = hints(lambda e: True)
    assert "the disks are 90% busy, reading 30.0MiB/s" in found["io-bound"].evidence


def test_the_verdict_reads_the_gpus_the_job_used_at_their_peak_memory() -> None:
    """A finished job is gone from every device's process list, and its memory with it: the
    verdict took every device for the job's (another user's full GPU 1 said "GPU memory
    nearly full") and GPU 0's last, freed memory. Over the run, GPU 0 listed the job's pid
    and held 78 of its 80 GiB: that is the pressure, and GPU 1 is none of the job's."""
    from perftop.events import GpuSample, Hello, JobExit, Step
    from perftop.events.probes import GPU_FIELDS
    from perftop.hints.verdict import verdict
    from perftop.model.session import Session

    total = 81559 * 2**20  # what NVML reports as total memory of an H100 80GB

    def gpu(i: int, used: int, procs: tuple[tuple[int, int, None], ...]) -> tuple:
        row = dict.fromkeys(GPU_FIELDS)
        row.update(index=i, name="NVIDIA H100 80GB HBM3", util_percent=97.0, mem_used=used,
                   mem_total=total, processes=procs)  # fmt: skip
        return tuple(row.values())

    other = gpu(1, 79000 * 2**20, ((4242, 78000 * 2**20, None),))  # another user's job
    s = Session()
    s.apply(Hello(1.0, 100, 1, "node", ("train.py",), None, None, None, "cuda:0", "2.13"))
    for i in range(20):
        s.apply(Step(100, i, 2.0 + i, 2.9 + i))
        mine = gpu(0, 78000 * 2**20, ((100, 77500 * 2**20, None),))
        s.apply(GpuSample(2.95 + i, (mine, other)))
    s.apply(GpuSample(23.0, (gpu(0, 600 * 2**20, ()), other)))  # the job has exited
    s.apply(JobExit(23.1, 100, 0))
    found = {h.id: h for h in verdict(s.snapshot(window=None))}
    h = found["gpu-memory-pressure"]
    assert h.evidence == ("GPU 0 memory 76.2GiB of 79.6GiB (96%)",), h.evidence


def test_the_verdict_reads_the_hosts_memory_at_its_tightest() -> None:
    """`worker-memory` says how much memory the host has available, and is high where it
    is low or swap is used: over a whole run, the least available and the most swapped, not
    the end's, when the job's workers had freed theirs (22 GiB available, no swap)."""
    from perftop.events import HostSample
    from perftop.hints.verdict import whole_run_view
    from perftop.model.session import Session

    gib = 2**30
    s = Session()
    for i, (avail, swap) in enumerate([(6 * gib, 0), (gib, gib // 2), (3 * gib, gib // 4)]):
        s.apply(HostSample(10.0 + i, 1.0, 2, 50.0, (50.0, 50.0), 0.0, (1.0, 1.0, 1.0),
                           24 * gib, 23 * gib - avail, avail, 4 * gib, swap, 0, 0, 0.0, 0, 0))  # fmt: skip
    s.apply(HostSample(13.0, 1.0, 2, 5.0, (5.0, 5.0), 0.0, (1.0, 1.0, 1.0),
                       24 * gib, 2 * gib, 22 * gib, 4 * gib, 0, 0, 0, 0.0, 0, 0))  # fmt: skip
    end = s.snapshot(window=None)
    assert (end.host.mem_available_bytes, end.host.swap_used_bytes) == (22 * gib, 0)
    view = whole_run_view(end).host
    assert (view.mem_available_bytes, view.swap_used_bytes) == (gib, gib // 2)


def test_a_hint_held_to_the_end_says_the_whole_runs_figures(tmp_path: Path) -> None:
    """The bundled demo recording (a real run): `input-bound` held to the end, and the
    verdict gives it. Its evidence said the live engine's last look ("host CPU 83% busy",
    taken as the job shut down; in the TUI once, the workers' line gone) beside the Host
    section's "CPU avg 81%": now the verdict's, the whole run's, as the rest of the report.
    A hint that left before the end keeps what it said then."""
    from dataclasses import replace

    from perftop.hints.verdict import merge

    demo = Path(__file__).parents[1] / "screenshots" / "demo.perftop"
    text = perftop("report", str(demo), cwd=tmp_path).stdout
    avg = re.search(r"CPU avg (\d+)%", text)
    assert avg is not None, text
    assert f"- host CPU {avg.group(1)}% busy on 2 cores" in text, text

    live = Hint("input-bound", "high", "live", ("at the end",), since_t=5.0)
    left = Hint("cpu-contention", "medium", "left", ("then",), since_t=6.0, until_t=9.0)
    whole = (
        replace(live, title="whole", evidence=("over the run",), since_t=None, whole_run=True),
        replace(left, title="whole", evidence=("over the run",), since_t=None, until_t=None),
    )
    got = {h.id: h for h in merge((live, left), whole)}
    h, e = got["input-bound"], got["cpu-contention"]
    assert (h.title, h.evidence, h.since_t, h.seen_live, h.whole_run) == (
        "whole",
        ("over the run",),
        5.0,
        True,
        True,
    )
    assert (e.title, e.evidence, e.until_t, e.whole_run) == ("left", ("then",), 9.0, True)
