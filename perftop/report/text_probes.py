"""The probes' part of the human report: process figures, the host and the GPUs, as
tables rendered from the JSON report (so text and JSON always agree)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perftop.fmt import (
    NA,
    Block,
    fraction,
    loader_label,
    loader_suffix,
    nbytes,
    number,
    percent,
    process_label,
    table,
)
from perftop.report.loader_runs import run_range, runs_of
from perftop.report.probes_json import PROC_KEYS
from perftop.report.proc_groups import grouped

_GRAD: dict[Any, str] = {True: "on", False: "off"}
# a run of loaders by the kind of interval outside the steps they started in ("": in them)
WAIT_SHOWN = 0.05  # a core wait this large (of the time seen) gets the Processes column
_RUN_WORDS = {"eval": "an evaluation's, made at each evaluation", "": "one made at each epoch"}


def loaders_table(loaders: Sequence[dict[str, Any]]) -> Block:
    """One row per loader; a run of loaders made anew alike (an evaluation's, at every
    evaluation: loader_runs.py) is one row where its first one was, said below."""
    run = runs_of(loaders)
    rows = []
    for ld in loaders:
        head = ld.get("remade_from")
        members = run.get((ld.get("host") or "", ld["pid"], head)) if head is not None else None
        if members is not None and members[0] is not ld:
            continue
        rows.append(
            [
                f"{ld['host']}:{ld['pid']}" if ld.get("host") else str(ld["pid"]),
                (
                    f"{run_range(members)} ×{len(members)}"
                    if members
                    else loader_label(ld.get("loader_id"))
                ),  # fmt: skip
                ld["dataset"],
                _s(_GRAD.get(ld.get("grad_enabled"))),
                _s(ld.get("during")),
                str(ld["num_workers"]),
                _s(ld.get("start_method")),
                _s(ld["batch_size"]),
                _yn(ld["pin_memory"]),
                _s(ld["prefetch_factor"]),
                _yn(ld["persistent_workers"]),
            ]
        )
    text: str = table(
        ["pid", "loader", "dataset", "grad", "during", "workers", "start", "batch", "pin",
         "prefetch", "persistent"],
        rows,
    )  # fmt: skip
    if not run:
        return Block(text)
    kinds = sorted({members[0].get("during") or "" for members in run.values()}, reverse=True)
    made = " or ".join(_RUN_WORDS.get(k, f"one made outside the steps ({k})") for k in kinds)
    return Block(
        text + "\n  ×N: loaders made anew with the same settings, each iterated once, after "
        f"the first training step ({made}); --json lists each"
    )


def processes_table(procs: list[dict[str, Any]], loaders: Sequence[dict[str, Any]] = ()) -> Block:
    """One row per process: its role and what it is (its script, title or program: Ray's
    daemons are not anonymous "other" rows), then CPU and memory over the run; where a collector
    merged nodes, each pid is prefixed with its host (pids repeat across hosts). A loader's
    workers started anew each epoch, and those of a run of loaders made anew alike, are one
    row per worker index (proc_groups.py), said below the table."""
    if any(p.get("host") for p in procs):
        procs = [{**p, "pid": f"{p['host']}:{p['pid']}"} for p in procs]
    procs = grouped(procs, runs_of(loaders))
    # a process that waited for a core (cpu-contention's figure): the column, where one did
    waits = any((p.get("core_wait_share_avg") or 0.0) >= WAIT_SHOWN for p in procs)
    rows: str = table(
        ["pid", "role", "command", "rank", "worker", "cpu avg", "cpu max"]
        + (["core wait"] if waits else [])
        + ["rss max", "pss max", "uss first", "uss last", "read", "written"],
        [
            [
                f"{p['processes']} pids" if "processes" in p else str(p["pid"]),
                p["role"],
                process_label(p.get("name") or "", p.get("cmdline") or "", 32) or "-",
                _s(p["rank"]),
                _s(p["worker_id"]) + _loader(p),
                _avg(p),
                percent(p.get("cpu_percent_max")),
            ]
            + ([fraction(p.get("core_wait_share_avg"))] if waits else [])
            + [
                nbytes(p.get("rss_bytes_max")),
                nbytes(p.get("pss_bytes_max")),
                nbytes(p.get("uss_bytes_first")),
                nbytes(p.get("uss_bytes_last")),
                nbytes(p.get("io_read_bytes")),
                nbytes(p.get("io_write_bytes")),
            ]
            for p in procs
        ],
    )  # fmt: skip
    if waits:
        rows += (
            "\n  core wait: the share of the time seen that the process's main thread (a "
            "training process's training thread) was runnable and not running: no core "
            "free, or its cgroup's CPU limit spent (the kernel's run-queue delay)"
        )
    if any(unseen(p) for p in procs):
        rows += (
            "\n  N/A in every column: the probes never saw that process, or any of a row's "
            "pids (each ended before their first look at it, as a short evaluation's loader "
            "workers may)"
        )
    many = [p["processes"] for p in procs if "processes" in p]
    if not many:
        return Block(rows)
    pool = any(p["role"] == "other" for p in procs if "processes" in p)
    return Block(
        rows
        + (
            "\n  N pids: a worker started anew each epoch and for each pass over its loader "
            "(not persistent_workers), or by each loader of a run (×N above)"
            + (
                ", or an other process made anew by its parent with its command, one after "
                "another (a pool made each epoch), by its place in the pool"
                if pool
                else ""
            )
            + f": its {sum(many)} processes in {len(many)} rows, with the "
            "range of their CPU averages, their highest maxima, the first sampled one's USS at its "
            "start and the last sampled one's at its end, their reads and writes summed (--json lists each)"
        )
    )


def _loader(p: dict[str, Any]) -> str:
    """``·L1``, or ``·L1–L40`` for a row of a run's workers (its count is in the pid column)."""
    run = p.get("loader_run")
    return "·" + run if run else loader_suffix(p.get("loader_id"))


def unseen(p: dict[str, Any]) -> bool:
    """A process the probes never sampled: known from the hook only (a loader's worker)."""
    return not p.get("name") and all(p.get(k) is None for k in PROC_KEYS)


def _avg(p: dict[str, Any]) -> str:
    lo_hi = p.get("cpu_percent_avg_range")
    if lo_hi is None:
        return percent(p.get("cpu_percent_avg"))
    lo, hi = lo_hi
    return percent(lo) if round(lo) == round(hi) else f"{lo:.0f}–{percent(hi)}"


def host_lines(h: dict[str, Any]) -> list[str]:
    if not h or h.get("cpu_percent_avg") is None and h.get("memory_used_bytes_max") is None:
        return []
    return [
        "",
        "Host",
        f"  {h.get('cpu_count') or NA} cores, CPU avg {percent(h.get('cpu_percent_avg'))}, "
        f"iowait avg {percent(h.get('iowait_percent_avg'), 1)}",
        *job_cores_line(h),
        f"  memory used max {nbytes(h.get('memory_used_bytes_max'))} "
        f"of {nbytes(h.get('memory_total_bytes'))}",
        f"  disk read {nbytes(h.get('disk_read_bytes'))}, "
        f"written {nbytes(h.get('disk_write_bytes'))}, "
        f"busy avg {percent(h.get('disk_busy_percent_avg'))}",
    ]


def job_cores_line(h: dict[str, Any]) -> list[str]:
    """What the job may use where it is less than the host (last seen)."""
    quota, cpus = h.get("job_cpu_quota"), h.get("job_cpus")
    if quota is not None:
        return [f"  the job may use {quota:g} cores: its cgroup's CPU limit"]
    if cpus is not None:
        return [f"  the job may run on CPUs {cpus} only: its CPU affinity"]
    return []


GPU_COLUMNS = (
    ("util avg", "util_percent_avg", percent),
    ("util max", "util_percent_max", percent),
    ("SM active avg", "sm_activity_percent_avg", percent),
    ("mem max", "memory_used_bytes_max", nbytes),
    ("power avg", "power_w_avg", lambda x: NA if x is None else f"{x:.0f}W"),
    ("temp max", "temperature_c_max", lambda x: NA if x is None else f"{x:.0f}C"),
    ("SM clock avg", "sm_clock_mhz_avg", lambda x: number(x, 0)),
)


def gpu_lines(gpus: list[dict[str, Any]], note: str) -> list[str]:
    out = ["", "GPUs"]
    if not gpus:
        return [*out, f"  none: {note or 'no GPU probe ran'}"]
    out.append(
        table(
            ["gpu", "name", *(c[0] for c in GPU_COLUMNS)],
            [
                [str(g["index"]), g["name"], *(fn(g.get(key)) for _, key, fn in GPU_COLUMNS)]
                for g in gpus
            ],
        )
    )
    out.append("  util = share of time a kernel ran (NVML); SM active = share of SMs busy (GPM)")
    if note:
        out.append(f"  {note}")
    return out


def _s(x: Any) -> str:
    return "-" if x is None else str(x)


def _yn(x: bool) -> str:
    return "yes" if x else "no"
