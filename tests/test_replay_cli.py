"""`replay`, `export`, `diff` and `report` slices through the real CLI, on real recordings."""

from __future__ import annotations

import csv
import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

from perftop.events import SessionStart, Step
from perftop.recording import RecordingWriter
from tests.helpers import perftop_process as perftop


def bad_files(where: Path) -> dict[str, Path]:
    out = {}
    for name, content in (
        ("empty", b""),
        ("foreign", b"hello world, not a recording at all"),
        ("magic-only", b"PERFTOP\x00"),
        ("corrupt", b"PERFTOP\x00" + os.urandom(64)),
    ):
        p = where / f"{name}.perftop"
        p.write_bytes(content)
        out[name] = p
    newer = where / "newer.perftop"
    w = RecordingWriter(newer)
    w.write_events([SessionStart(1.0, ("x",), "/", "h", 1, "9.0", version=99)])
    w.close()
    out["newer"] = newer
    out["missing"] = where / "missing.perftop"
    return out


@pytest.mark.parametrize("command", ["replay", "export", "diff", "report"])
def test_every_bad_file_is_one_line_and_a_non_zero_exit(tmp_path: Path, command: str) -> None:
    good = tmp_path / "good.perftop"
    w = RecordingWriter(good)
    w.write_events([SessionStart(1.0, ("x",), "/", "h", 1, "0"), Step(2, 0, 1.0, 1.5)])
    w.close()
    for kind, bad in bad_files(tmp_path).items():
        before = bad.read_bytes() if bad.exists() else None
        args = {
            "replay": ["replay", str(bad)],
            "export": ["export", str(bad), "--chrome-trace", str(tmp_path / "t.json")],
            "diff": ["diff", str(good), str(bad)],
            "report": ["report", str(bad)],
        }[command]
        r = perftop(*args, cwd=tmp_path)
        assert r.returncode == 3, (kind, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (kind, r.stderr)
        assert str(bad) in r.stderr, (kind, r.stderr)
        if kind == "newer":
            assert "format 99" in r.stderr
        if before is not None:
            assert bad.read_bytes() == before  # reading never modifies a file


def test_replay_without_a_file_takes_the_newest_here(tmp_path: Path, recordings) -> None:
    r = perftop("replay", cwd=tmp_path)
    assert r.returncode == 3 and "no .perftop recording" in r.stderr
    for i, name in enumerate(("old", "new")):
        (tmp_path / f"{name}.perftop").write_bytes(recordings["fixed"].read_bytes())
        os.utime(tmp_path / f"{name}.perftop", (time.time() - 100 + i * 50,) * 2)
    r = perftop("replay", cwd=tmp_path)  # no terminal here: refused after the file is checked
    assert r.returncode == 2 and "new.perftop" in r.stderr and "needs a terminal" in r.stderr


def test_export_usage_errors(tmp_path: Path, recordings) -> None:
    rec = str(recordings["fixed"])
    r = perftop("export", rec, cwd=tmp_path)
    assert r.returncode == 2 and "--chrome-trace" in r.stderr
    r = perftop("export", rec, "--chrome-trace", str(tmp_path / "no/such/dir/t.json"), cwd=tmp_path)
    assert r.returncode == 2 and "cannot write" in r.stderr and "Traceback" not in r.stderr


def check_trace_format(trace: dict) -> None:
    """The trace-event format's rules for the phases perftop writes."""
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    named = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    opened: dict[tuple, list[float]] = {}  # an async slice's begins, by its process and id
    for ev in events:
        assert ev["ph"] in ("X", "i", "M", "C", "b", "e") and isinstance(ev["pid"], int), ev
        if ev["ph"] in ("b", "e"):  # an async slice: its begin, then its end, one id
            key = (ev["pid"], ev["cat"], ev["id2"]["local"], ev["name"])
            if ev["ph"] == "b":
                opened.setdefault(key, []).append(ev["ts"])
            else:
                assert opened.get(key) and opened[key].pop() <= ev["ts"], ev
        assert isinstance(ev["name"], str) and ev["name"], ev
        if ev["ph"] != "C":  # a counter belongs to its process; the others to a thread
            assert isinstance(ev["tid"], int), ev
        if ev["ph"] != "M":
            assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0, ev
            assert ev["pid"] in named, ev  # every track is named
        if ev["ph"] == "X":
            assert ev["dur"] >= 0
        elif ev["ph"] == "i":
            assert ev["s"] in ("g", "p", "t")
        elif ev["ph"] == "C":
            args = ev["args"]
            assert args and all(isinstance(v, (int, float)) for v in args.values()), ev
        elif ev["ph"] == "M":
            assert ev["name"] in (
                "process_name", "thread_name", "process_sort_index", "thread_sort_index"
            ), ev  # fmt: skip
            if ev["name"].endswith("_name"):
                assert isinstance(ev["args"]["name"], str) and ev["args"]["name"]
            else:
                assert isinstance(ev["args"]["sort_index"], int)
    assert not [k for k, begun in opened.items() if begun], opened  # every slice ended
    # complete events of one thread nest (a viewer draws overlapping ones wrongly)
    spans: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for ev in events:
        if ev["ph"] == "X":
            spans.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"]))
    for track, xs in spans.items():
        stack: list[float] = []
        for t0, t1 in sorted(xs, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= t0 + 1:  # (rounded to the µs)
                stack.pop()
            assert not stack or t1 <= stack[-1] + 1, (track, t0, t1, stack)
            stack.append(t1)


def test_chrome_trace_structure(tmp_path: Path, recordings) -> None:
    out = tmp_path / "trace.json"
    r = perftop("export", str(recordings["sync"]), "--chrome-trace", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    rep = json.loads(perftop("report", "--json", str(recordings["sync"]), cwd=tmp_path).stdout)
    check_trace_format(trace)
    steps = [e for e in events if e["ph"] == "X" and e["cat"] == "step"]
    assert len(steps) == rep["steps"]["count"]
    for i, ev in enumerate(events):  # a step's phases follow it, inside it, end to end
        if ev["ph"] == "X" and ev["cat"] == "step":
            j, end = i + 1, ev["ts"]
            while j < len(events) and events[j].get("cat") == "phase":
                assert abs(events[j]["ts"] - end) < 1 and events[j]["pid"] == ev["pid"]
                end = events[j]["ts"] + events[j]["dur"]
                j += 1
            assert j > i + 1 and end <= ev["ts"] + ev["dur"] + 1
    syncs = [e for e in events if e["ph"] == "i" and e["cat"] == "sync"]
    assert {e["args"]["line"] for e in syncs} == {s["line"] for s in rep["sync_events"]}
    assert any(e["ph"] == "M" and e["name"] == "process_name" for e in events)


def test_chrome_trace_names_workers_and_draws_counters(tmp_path: Path, recordings) -> None:
    out = tmp_path / "trace.json"
    r = perftop("export", str(recordings["fixed"]), "--chrome-trace", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trace = json.loads(out.read_text())
    check_trace_format(trace)
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    workers = {p for p, n in names.items() if n.startswith("DataLoader worker ")}
    main = [p for p, n in names.items() if n.startswith("main (pid ")]
    assert len(workers) >= 2 and len(main) == 1, names
    for p in workers:  # a worker's track is not empty: its memory and batches
        kinds = {e["name"] for e in events if e["pid"] == p and e["ph"] == "C"}
        assert {"memory MiB", "batches"} <= kinds, (names[p], kinds)
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"CPU %", "memory MiB", "host CPU %", "host memory MiB", "data wait %"} <= counters
    waits = [e["args"]["data wait %"] for e in events if e["name"] == "data wait %"]
    assert all(0 <= w <= 100 for w in waits) and max(waits) > 0


def test_chrome_trace_puts_each_nodes_processes_on_their_own_tracks(tmp_path: Path) -> None:
    """A fleet recording (node scopes, as a collector writes them) with pid 7 on two nodes."""
    from perftop.events import GpuSample, Hello, NodeScope
    from perftop.events.probes import GPU_FIELDS

    rec = tmp_path / "fleet.perftop"
    w = RecordingWriter(rec)
    gpu = dict.fromkeys(GPU_FIELDS)
    gpu.update(index=0, name="H100", util_percent=80.0, mem_used=2**30, mem_total=2**34)
    evs: list = [SessionStart(1.0, ("collect",), "/", "col", 1, "0")]
    for node in ("a", "b"):
        evs += [NodeScope(node), Hello(1.5, 7, 1, node, ("t.py",), None, None, None, "cuda", "2"),
                Step(7, 0, 2.0, 2.5), GpuSample(2.5, (tuple(gpu.values()),)), NodeScope("")]  # fmt: skip
    w.write_events(evs)
    w.close()
    out = tmp_path / "trace.json"
    r = perftop("export", str(rec), "--chrome-trace", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trace = json.loads(out.read_text())
    check_trace_format(trace)
    events = trace["traceEvents"]
    steps = {e["pid"] for e in events if e.get("cat") == "step"}
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(names[p] for p in steps) == ["main (pid 7) @ a", "main (pid 7) @ b"]
    gpus = [e for e in events if e["ph"] == "C" and e["name"] == "GPU use %"]
    assert len({e["pid"] for e in gpus}) == 2 and all(e["args"] == {"GPU 0": 80.0} for e in gpus)
    assert {names[e["pid"]] for e in gpus} == {"host @ a", "host @ b"}


def test_csv_export(tmp_path: Path, recordings) -> None:
    out = tmp_path / "csv"
    r = perftop("export", str(recordings["fixed"]), "--csv", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert {p.name for p in out.iterdir()} == {
        "steps.csv", "processes.csv", "host.csv", "gpus.csv", "sync_sites.csv", "between.csv",
        "collectives.csv",
    }  # fmt: skip
    rep = json.loads(perftop("report", "--json", str(recordings["fixed"]), cwd=tmp_path).stdout)
    with open(out / "steps.csv", newline="") as f:
        steps = list(csv.DictReader(f))
    assert len(steps) == rep["steps"]["count"]
    for row in steps:
        parts = sum(
            float(row[k]) for k in ("data_s", "forward_other_s", "backward_s", "optimizer_s")
        )
        assert abs(parts - float(row["duration_s"])) < 1e-6
        assert float(row["t1_s"]) >= float(row["t0_s"]) >= 0
    with open(out / "processes.csv", newline="") as f:
        procs = list(csv.DictReader(f))
    pids = {int(p["pid"]) for p in procs}
    sampled = {p["pid"] for p in rep["processes"] if p["rss_bytes_max"] is not None}
    assert sampled and sampled == pids  # every process the probe saw, and only those
    with open(out / "host.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) >= 2
    with open(out / "processes.csv", newline="") as f:
        header = next(csv.reader(f))
    assert header[-3:] == ["role", "worker_id", "host"] and header[:3] == ["t_s", "dt_s", "pid"]
    roles = {(p["role"], p["worker_id"]) for p in procs}
    assert ("main", "") in roles and {("worker", "0"), ("worker", "1")} <= roles, roles
    assert {p["host"] for p in procs} == {socket.gethostname()}


def test_diff_says_the_fix_helped(tmp_path: Path, recordings) -> None:
    a, b = str(recordings["starved"]), str(recordings["fixed"])
    r = perftop("diff", "--json", a, b, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    rows = {f["name"]: f for f in d["figures"]}
    # each side is its recording's report, and the verdict is the change's direction (how
    # much the workers helped is the host's: 17 ms to 6.7 ms on a loaded 2-core CI host)
    reps = [
        json.loads(perftop("report", "--json", x, cwd=tmp_path).stdout)["steps"] for x in (a, b)
    ]
    for name, got in (("phase_data_p50_s", [s["phases_s"]["data"] for s in reps]),
                      ("steps_per_s", [s["steps_per_s"] for s in reps])):  # fmt: skip
        row = rows[name]
        assert [row["a"], row["b"]] == got, (name, row)
        assert row["change"] == pytest.approx(got[1] - got[0]) and row["ratio"] == pytest.approx(
            got[1] / got[0]), row  # fmt: skip
    assert rows["phase_data_p50_s"]["b"] < rows["phase_data_p50_s"]["a"] * 0.95
    assert rows["phase_data_p50_s"]["verdict"] == "better"
    assert rows["steps_per_s"]["b"] > rows["steps_per_s"]["a"] * 1.05
    assert rows["steps_per_s"]["verdict"] == "better"
    assert rows["workers"]["a"] == 0 and rows["workers"]["b"] == 4
    assert set(d["hints"]) == {"added", "removed", "kept"}
    text = perftop("diff", a, b, cwd=tmp_path)
    assert text.returncode == 0
    assert "better in B:" in text.stdout and "phase_data_p50_s" in text.stdout
    same = json.loads(perftop("diff", "--json", a, a, cwd=tmp_path).stdout)
    assert all(f["verdict"] in ("same", "n/a") for f in same["figures"])


def test_report_slices(tmp_path: Path, recordings) -> None:
    rec = str(recordings["starved"])
    full = json.loads(perftop("report", "--json", rec, cwd=tmp_path).stdout)
    r = perftop("report", "--json", "--from-step", "10", "--to-step", "20", rec, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    part = json.loads(r.stdout)
    assert part["steps"]["count"] == 11 and part["slice"]["from_step"] == 10
    assert part["duration_s"] < full["duration_s"]
    # a slice's hints are the rules over its own figures, and its text says so: never the
    # whole run's verdict (the whole run's report says that one)
    assert any(h["whole_run"] for h in part["hints"]), part["hints"]
    text = perftop("report", "--from-step", "10", "--to-step", "20", rec, cwd=tmp_path).stdout
    assert "the slice's verdict" in text and "whole-run" not in text, text
    whole = perftop("report", rec, cwd=tmp_path).stdout
    assert "whole-run verdict" in whole and "the slice's" not in whole, whole
    r = perftop("report", "--json", "--from-time", "0", "--to-time", "1e9", rec, cwd=tmp_path)
    assert json.loads(r.stdout)["steps"]["count"] == full["steps"]["count"]
    # the job said hello with its hook's first send, after its first steps: a slice of
    # those keeps what its process is (its role), and why there is no GPU (said once)
    r = perftop("report", "--json", "--from-step", "1", "--to-step", "2", rec, cwd=tmp_path)
    early = json.loads(r.stdout)
    main = next(p["pid"] for p in full["processes"] if p["role"] == "main")
    assert [p["role"] for p in early["processes"] if p["pid"] == main] == ["main"], early
    assert early["gpu_note"] == full["gpu_note"] != "", early["gpu_note"]
    r = perftop("report", "--json", "--to-time", "0.001", rec, cwd=tmp_path)
    assert json.loads(r.stdout)["steps"]["count"] == 0
    r = perftop("report", "--from-step", "9", "--to-step", "3", rec, cwd=tmp_path)
    assert r.returncode == 2 and "--to-step" in r.stderr
    r = perftop("report", "--from-step", "100000", rec, cwd=tmp_path)
    assert r.returncode == 2 and "fewer than" in r.stderr
    assert "seconds since the session start" in perftop("report", "--help", cwd=tmp_path).stdout


def test_diff_of_one_recording_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from perftop.cli import main

    for args in (["diff", "a.perftop"], ["diff"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "perftop diff A B" in err and "usage" not in err, err


def test_csv_cells_the_job_names_are_never_formulas(tmp_path: Path) -> None:
    """A job chooses its process name: a spreadsheet opening the CSV must not run it. A
    real job names itself ``=1+2`` (``prctl``); its cell reads as text (a ``'`` first), the
    figures beside it as they are."""
    (tmp_path / "job.py").write_text(
        "import ctypes, time, torch\n"
        "ctypes.CDLL(None).prctl(15, b'=1+2', 0, 0, 0)  # PR_SET_NAME\n"
        "model = torch.nn.Linear(4, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "for i in range(60):\n"
        "    loss = model(torch.randn(8, 4)).pow(2).mean()\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
        "    time.sleep(0.02)\n"
    )
    rec = tmp_path / "r.perftop"
    run = perftop("run", "--headless", "--record", str(rec), "--", sys.executable, "job.py",
                  cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = tmp_path / "csv"
    assert perftop("export", str(rec), "--csv", str(out), cwd=tmp_path).returncode == 0
    with open(out / "processes.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    named = [r for r in rows if r["name"] == "'=1+2"]
    assert named and not any(r["name"].startswith(("=", "+", "-", "@")) for r in rows)
    assert all(float(r["rss"]) > 0 for r in named if r["rss"])


def test_exported_collectives_wait_for_every_rank_of_their_group(tmp_path: Path) -> None:
    """Three ranks send their records when each will: two ranks' batches before the third's
    first. Each collective is still lined up across all three (not matched between the
    first two, and the third's records left over as never entered by the others)."""
    from perftop.events import CollBatch, Hello

    rec = tmp_path / "three.perftop"
    w = RecordingWriter(rec)
    evs: list = [SessionStart(1.0, ("torchrun",), "/", "n", 1, "0")]
    for rank, pid in enumerate((11, 12, 13)):
        evs.append(Hello(1.5, pid, 1, "n", ("t.py",), rank, rank, 3, "cpu", "2"))
    # (pg, seq, op, bytes, sizes, t_created, thread, call, phase, line), as the hook sends
    # them; rank 2 (pid 13) arrives 0.1 s after the others at each all_reduce
    for pid, late in ((11, 0.0), (12, 0.0), (13, 0.1)):
        records = tuple(("0", seq, "all_reduce", 4, "[[1]]", 2.0 + seq + late, 1, "", "backward",
                         "t.py:9 main") for seq in (1, 2, 3))  # fmt: skip
        evs.append(CollBatch(5.0 + pid, pid, records))
    w.write_events(evs)
    w.close()
    out, csvs = tmp_path / "trace.json", tmp_path / "csv"
    r = perftop("export", str(rec), "--chrome-trace", str(out), "--csv", str(csvs), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trace = json.loads(out.read_text())
    check_trace_format(trace)
    begun = [e for e in trace["traceEvents"] if e["ph"] == "b"]
    assert len(begun) == 9 and not [e for e in trace["traceEvents"] if e["ph"] == "i"
                                    and e["cat"] == "collective"]  # fmt: skip
    for e in begun:
        want = 0.0 if e["pid"] == 13 else 0.1
        assert abs(e["args"]["wait_for_others_s"] - want) < 1e-6, e
        assert e["args"]["last_to_arrive"] == (e["pid"] == 13), e
    with open(csvs / "collectives.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 9 and {x["entered_by_all"] for x in rows} == {"1"}, rows
    assert sorted(x["rank"] for x in rows if x["last_to_arrive"] == "1") == ["2", "2", "2"]


def test_report_says_perftops_own_cpu_of_the_run_and_of_a_slice(tmp_path: Path, recordings) -> None:
    """The report gives perftop's own CPU (the monitor's process, its TUI with it): the
    mean of the once-a-second readings the recording holds (the header's figure once the
    job ended), of the run or of a slice's seconds, and its last resident size."""
    from perftop.events import MonitorStats
    from perftop.recording import read_events

    rec = str(recordings["fixed"])
    stats = [e for e in read_events(rec) if isinstance(e, MonitorStats)]
    assert len(stats) >= 3, stats  # a 5 s run: one a second
    full = json.loads(perftop("report", "--json", rec, cwd=tmp_path).stdout)
    mean = sum(e.cpu_percent for e in stats) / len(stats)
    assert full["monitor_cpu_percent"] == round(mean, 1) > 0.0, full["monitor_cpu_percent"]
    assert full["monitor_rss_bytes"] == stats[-1].rss_bytes > 10 * 2**20
    text = perftop("report", rec, cwd=tmp_path).stdout
    assert f"perftop itself: {round(mean, 1):.1f}% of one core on average" in text, text
    start = next(e.t for e in read_events(rec) if isinstance(e, SessionStart))
    lo, hi = stats[1].t - start - 0.01, stats[2].t - start + 0.01  # two readings' seconds
    r = perftop("report", "--json", "--from-time", str(lo), "--to-time", str(hi), rec, cwd=tmp_path)
    part = json.loads(r.stdout)["monitor_cpu_percent"]
    assert part == round((stats[1].cpu_percent + stats[2].cpu_percent) / 2, 1), part
